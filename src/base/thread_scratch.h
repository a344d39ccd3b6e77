// A vector a thread keeps from call to call, so that its elements keep what they allocated (the
// vectors inside them keep their capacity) and a hot path allocates nothing once warm. One call at a
// time borrows it; a call nested in another on the same thread gets a vector of its own.
#pragma once

#include <vector>

namespace loom {

template <typename T>
class ThreadScratch {
 public:
  ThreadScratch() : lent_(!inUse()), vec_(lent_ ? kept() : own_) {
    if (lent_) inUse() = true;
  }
  ~ThreadScratch() {
    if (lent_) inUse() = false;
  }
  ThreadScratch(const ThreadScratch&) = delete;
  ThreadScratch& operator=(const ThreadScratch&) = delete;

  std::vector<T>& get() { return vec_; }

 private:
  static std::vector<T>& kept() {
    thread_local std::vector<T> v;
    return v;
  }
  static bool& inUse() {
    thread_local bool lent = false;
    return lent;
  }
  bool lent_;
  std::vector<T> own_;
  std::vector<T>& vec_;
};

}  // namespace loom
