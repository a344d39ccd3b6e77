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
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (bell->sleepers.load(std::memory_order_relaxed) == 0) return;
  bell->seq.fetch_add(1, std::memory_order_seq_cst);
  futex(&bell->seq, FUTEX_WAKE, INT_MAX, nullptr);
}

uint32_t announceSleep(Doorbell* bell) {
  bell->sleepers.fetch_add(1, std::memory_order_seq_cst);
  return bell->seq.load(std::memory_order_seq_cst);
}

void sleepAnnounced(Doorbell* bell, uint32_t seen, int64_t timeoutUs) {
  timespec ts{static_cast<time_t>(timeoutUs / 1000000), static_cast<long>((timeoutUs % 1000000) * 1000)};
  futex(&bell->seq, FUTEX_WAIT, seen, &ts);
  bell->sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

void cancelSleep(Doorbell* bell) { bell->sleepers.fetch_sub(1, std::memory_order_seq_cst); }

}  // namespace loom
