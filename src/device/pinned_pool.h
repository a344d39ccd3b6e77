// Pinned (page-locked) host memory for staging device buffers and plan kernels' encoded plans.
// cudaHostAlloc costs milliseconds (and may synchronize the device), so freed blocks are kept by
// power-of-two size class and reused, a request taking the smallest cached block that holds it (up to
// 16 times its size), up to LOOM_PINNED_CACHE bytes cached in all (default 8G); beyond that, released
// blocks are freed. Blocks are portable (usable from every
// device's context). Thread-safe. CUDA builds only.
#pragma once

#include <cstddef>

#include "base/status.h"

namespace loom::device {

class PinnedBlock {
 public:
  PinnedBlock() = default;
  ~PinnedBlock() { release(); }
  PinnedBlock(PinnedBlock&& other) noexcept { *this = static_cast<PinnedBlock&&>(other); }
  PinnedBlock& operator=(PinnedBlock&& other) noexcept;
  PinnedBlock(const PinnedBlock&) = delete;
  PinnedBlock& operator=(const PinnedBlock&) = delete;

  // At least `bytes` of pinned memory (the previous block, if any, goes back to the pool).
  Status acquire(size_t bytes);
  void release();
  char* data() const { return data_; }
  size_t capacity() const { return capacity_; }

 private:
  char* data_ = nullptr;
  size_t capacity_ = 0;
};

// Frees every cached block (tests; blocks in use are not affected).
void trimPinnedPool();
// Bytes of pinned memory now cached for reuse.
size_t pinnedPoolCachedBytes();

}  // namespace loom::device
