// Monotonic time and deadlines (a deadline of 0 means "never").
#pragma once

#include <chrono>
#include <cstdint>

namespace loom {

inline uint64_t nowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

class Deadline {
 public:
  Deadline() = default;  // never expires
  static Deadline afterMs(int64_t ms) {
    Deadline d;
    if (ms > 0) d.atNs_ = nowNs() + static_cast<uint64_t>(ms) * 1000000ull;
    return d;
  }
  bool never() const { return atNs_ == 0; }
  bool expired() const { return atNs_ != 0 && nowNs() >= atNs_; }
  // Milliseconds left, clamped to [0, capMs]; capMs when the deadline never expires.
  int remainingMs(int capMs) const {
    if (atNs_ == 0) return capMs;
    uint64_t now = nowNs();
    if (now >= atNs_) return 0;
    uint64_t left = (atNs_ - now) / 1000000ull;
    return left > static_cast<uint64_t>(capMs) ? capMs : static_cast<int>(left);
  }

 private:
  uint64_t atNs_ = 0;
};

}  // namespace loom
