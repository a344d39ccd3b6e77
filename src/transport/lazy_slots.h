// A fixed row of slots whose objects are made on first use. A rank of a large job reaches many peers
// over few channels each, but its plans use only a handful of them (a ring's two neighbours, a tree's
// parent and children): making every connection object at init cost every rank O(peers) memory and
// time, O(n^2) in a process of n rank threads. A made object is read with one acquire load; the first
// reader of an empty slot makes it under a lock, because two threads of one rank (the caller and the
// progress thread) may ask for the same connection at once.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>

namespace loom {

template <typename T>
class LazySlots {
 public:
  LazySlots() = default;
  LazySlots(const LazySlots&) = delete;
  LazySlots& operator=(const LazySlots&) = delete;
  ~LazySlots() { clear(); }

  // n empty slots (what the slots held is deleted).
  void reset(size_t n) {
    clear();
    slots_ = std::make_unique<std::atomic<T*>[]>(n);  // value-initialized: every slot null
    size_ = n;
  }
  size_t size() const { return size_; }

  // The slot's object, or null while none was made or put there.
  T* get(size_t i) const { return slots_[i].load(std::memory_order_acquire); }

  // The slot's object, made by `make` (returning std::unique_ptr<T>, or null for none) if it has none.
  template <typename Make>
  T* getOrMake(size_t i, Make&& make) const {
    if (T* made = get(i)) return made;
    std::lock_guard<std::mutex> lock(mutex_);
    if (T* made = slots_[i].load(std::memory_order_relaxed)) return made;
    T* fresh = make().release();
    slots_[i].store(fresh, std::memory_order_release);
    return fresh;
  }

  // Puts an object made elsewhere (at setup, or by a handshake with a peer) in an empty slot.
  void put(size_t i, std::unique_ptr<T> object) const {
    std::lock_guard<std::mutex> lock(mutex_);
    delete slots_[i].exchange(object.release(), std::memory_order_acq_rel);
  }

  // Deletes every object; the slots stay, empty. No reader may be using one. (A load before each
  // exchange: most slots are empty, and a locked exchange of each was O(n) locked instructions.)
  void clear() {
    for (size_t i = 0; i < size_; ++i)
      if (slots_[i].load(std::memory_order_acquire)) delete slots_[i].exchange(nullptr, std::memory_order_acq_rel);
  }

 private:
  std::unique_ptr<std::atomic<T*>[]> slots_;
  size_t size_ = 0;
  mutable std::mutex mutex_;
};

}  // namespace loom
