#include "device/plan_slots.h"

#include <cuda_runtime_api.h>

#include "device/memory_kind.h"

namespace loom::device {

PlanSlots::~PlanSlots() {
  if (device_) cudaFree(device_);
}

Status PlanSlots::allocate(size_t count, size_t bytes) {
  LOOM_TRY(host_.acquire(count * bytes));
  void* d = nullptr;
  LOOM_CUDA_TRY(cudaMalloc(&d, count * bytes));
  device_ = static_cast<char*>(d);
  bytes_ = bytes;
  count_ = count;
  std::lock_guard<std::mutex> lock(mutex_);
  free_.clear();
  for (size_t i = count; i > 0; --i) free_.push_back(static_cast<int>(i - 1));  // slot 0 first
  return Status::Ok();
}

int PlanSlots::take() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (free_.empty()) return -1;
  const int slot = free_.back();
  free_.pop_back();
  return slot;
}

size_t PlanSlots::freeCount() {
  std::lock_guard<std::mutex> lock(mutex_);
  return free_.size();
}

void PlanSlots::give(int slot) {
  std::lock_guard<std::mutex> lock(mutex_);
  free_.push_back(slot);
}

}  // namespace loom::device
