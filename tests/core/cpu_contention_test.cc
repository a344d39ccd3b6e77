// The runnable-thread count that decides whether a wait on network connections spins
// (core/run/cpu_contention.h): threads that never sleep, more of them than cores, must show.
#include "core/run/cpu_contention.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace loom {
namespace {

TEST(CpuContention, MoreSpinningThreadsThanCoresAreSeen) {
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  ASSERT_GT(cpus, 0);
  std::atomic<bool> stop{false};
  std::vector<std::thread> spinners;
  for (long i = 0; i < cpus + 2; ++i)
    spinners.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  // The count is a snapshot: a spinner between two time slices is runnable all the same, so a few
  // reads suffice; the deadline only covers a machine that is slow to start the threads.
  bool seen = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!seen && std::chrono::steady_clock::now() < deadline) {
    seen = cpusOversubscribed();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  stop.store(true);
  for (std::thread& t : spinners) t.join();
  EXPECT_TRUE(seen) << cpus + 2 << " spinning threads on " << cpus << " cores were never counted as more than the cores";
}

}  // namespace
}  // namespace loom
