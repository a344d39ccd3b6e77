// How a communicator's recent waits for its peers ended, so that waiting threads spin only as long as
// spinning pays. Spinning for LOOM_SPIN_US (2 ms) catches a peer that answers within the window
// without a scheduler wake-up; but a peer that keeps arriving later (a straggler computing for 10 ms
// before each allreduce) makes every wait burn the whole window of a core the job's compute wants, and
// sleep anyway. So a waiter spins for twice the longest of the last waits that ended inside the window
// (at least kBriefSpinNs, at most the window), and only briefly when none did: short waits keep their
// spin, long ones stop paying for it. A wait's length is measured to its end even when the waiter
// slept, so waits that shorten again are seen while spinning is brief.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>

namespace loom {

class WaitHistory {
 public:
  // The least spin: enough for a peer that is already on its way (a message in flight, a rank a few
  // steps behind), so that a wait of microseconds never pays a wake-up.
  static constexpr int64_t kBriefSpinNs = 50'000;
  static constexpr size_t kWindow = 8;  // waits remembered

  // `fixed`: LOOM_SPIN_US was set, the user's spin is kept whatever the waits do.
  explicit WaitHistory(bool fixed = false) : fixed_(fixed) {}

  // A wait of `waitedNs` ended (the peer's message or room arrived). Threads of one communicator (the
  // progress thread and blocking callers) may record at once: a sample lost in that race only delays
  // the adaptation by one wait.
  void record(int64_t waitedNs) {
    const uint32_t n = count_.load(std::memory_order_relaxed);
    recent_[n % kWindow].store(waitedNs, std::memory_order_relaxed);
    count_.store(n + 1, std::memory_order_relaxed);
  }

  // How long a waiter should spin before it sleeps, given the configured spin.
  int64_t spinBudget(int64_t spinNs) const {
    if (fixed_ || spinNs <= kBriefSpinNs || count_.load(std::memory_order_relaxed) < kWindow) return spinNs;
    int64_t longestShort = 0;
    for (const std::atomic<int64_t>& w : recent_) {
      const int64_t ns = w.load(std::memory_order_relaxed);
      if (ns <= spinNs) longestShort = std::max(longestShort, ns);
    }
    return std::clamp(2 * longestShort, kBriefSpinNs, spinNs);
  }

 private:
  bool fixed_;
  std::array<std::atomic<int64_t>, kWindow> recent_{};  // the last waits' lengths, a ring
  std::atomic<uint32_t> count_{0};                      // waits recorded
};

}  // namespace loom
