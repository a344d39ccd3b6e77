#include "transport/doorbell.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

namespace loom {

// Not FUTEX_PRIVATE: the word may live in memory shared between processes.
static long futex(std::atomic<uint32_t>* addr, int op, uint32_t value, const timespec* timeout) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op, value, timeout, nullptr, 0);
}

void ringDoorbell(Doorbell* bell) {
  bell->seq.fetch_add(1, std::memory_order_seq_cst);
  if (bell->sleepers.load(std::memory_order_seq_cst) != 0) futex(&bell->seq, FUTEX_WAKE, INT_MAX, nullptr);
}

void sleepOnDoorbell(Doorbell* bell, uint32_t seen, int64_t timeoutUs) {
  timespec ts{static_cast<time_t>(timeoutUs / 1000000), static_cast<long>((timeoutUs % 1000000) * 1000)};
  bell->sleepers.fetch_add(1, std::memory_order_seq_cst);
  // The futex re-checks seq == seen atomically, so a ring between our check and the sleep is not lost.
  if (bell->seq.load(std::memory_order_seq_cst) == seen) futex(&bell->seq, FUTEX_WAIT, seen, &ts);
  bell->sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

}  // namespace loom
