// Where a launch's per-call host data lives: a communicator's fixed ring of slots, each a pinned host
// block (the lanes' statuses, which the kernel writes; a launch's call tables and an encoding on its
// way to the device, when it has them) and a device block (the tables, copied there), all allocated
// once at setup. A launch takes a free slot and keeps it until it ended; when none is free, the
// launcher waits for this rank's oldest launch (plan_kernels.h), which frees one. So the steady-state
// launch path allocates nothing: cudaHostAlloc may synchronize the device, and cudaMalloc does, which
// between a peer's launch and this rank's would deadlock ranks that share the GPU (FakeCuda showed it
// with a pinned block per launch). The wait cannot deadlock: the oldest launch needs only launches that
// peers have enqueued or will enqueue without waiting for anything newer. What does not fit a slot
// takes pooled memory (pinned_pool.h). Thread-safe. CUDA builds only.
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

#include "base/status.h"
#include "device/pinned_pool.h"

namespace loom::device {

class PlanSlots {
 public:
  static constexpr size_t kDefaultCount = 64;
  static constexpr size_t kDefaultBytes = size_t{64} << 10;

  PlanSlots() = default;
  ~PlanSlots();  // the launches using the slots have ended (plan_kernels.h waits for them)
  PlanSlots(const PlanSlots&) = delete;
  PlanSlots& operator=(const PlanSlots&) = delete;

  // `count` slots of `bytes` each on `device` (the caller has made it current).
  Status allocate(size_t count, size_t bytes);
  size_t slotBytes() const { return bytes_; }
  bool allocated() const { return !free_.empty() || count_ > 0; }

  // A free slot's index, or -1 when every slot is in use.
  int take();
  size_t count() const { return count_; }
  size_t freeCount();
  void give(int slot);
  char* host(int slot) const { return host_.data() + static_cast<size_t>(slot) * bytes_; }
  char* device(int slot) const { return device_ + static_cast<size_t>(slot) * bytes_; }

 private:
  PinnedBlock host_;
  char* device_ = nullptr;
  size_t bytes_ = 0;
  size_t count_ = 0;
  std::mutex mutex_;
  std::vector<int> free_;
};

}  // namespace loom::device
