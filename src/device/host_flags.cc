// HostFlags (host_flags.h).
#include <cuda_runtime_api.h>

#include "device/memory_kind.h"
#include "device/host_flags.h"

namespace loom::device {

HostFlags::~HostFlags() {
  if (block_) cudaFreeHost(block_);
}

Status HostFlags::acquire(Flag* out) {
  if (!block_) {
    void* block = nullptr;
    LOOM_CUDA_TRY(cudaHostAlloc(&block, words_ * sizeof(uint32_t), cudaHostAllocMapped | cudaHostAllocPortable));
    block_ = static_cast<uint32_t*>(block);
    for (size_t i = words_; i-- > 0;) free_.push_back(i);
  }
  if (free_.empty())
    return errorStatus(loomSystemError, "more than {} operations on device buffers are in flight on one communicator", words_);
  const size_t index = free_.back();
  void* device = nullptr;
  LOOM_CUDA_TRY(cudaHostGetDevicePointer(&device, block_ + index, 0));
  free_.pop_back();
  block_[index] = 0;
  out->host = block_ + index;
  out->device = static_cast<volatile uint32_t*>(device);
  out->index = index;
  return Status::Ok();
}

void HostFlags::release(const Flag& flag) { free_.push_back(flag.index); }

void HostFlags::open(const Flag& flag) {
  __atomic_store_n(const_cast<uint32_t*>(flag.host), 1u, __ATOMIC_RELEASE);
}

}  // namespace loom::device
