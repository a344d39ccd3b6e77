#include "device/stream_pool.h"

#include <algorithm>
#include <cstdint>
#include <atomic>
#include <mutex>

#include "device/memory_kind.h"

namespace loom::device {

Status launchPool(int device, cudaMemPool_t* out) {
  constexpr int kMaxDevices = 64;
  static std::mutex mutex;
  static std::atomic<cudaMemPool_t> pools[kMaxDevices] = {};
  if (device < 0 || device >= kMaxDevices) return errorStatus(loomInvalidArgument, "GPU {} is out of range", device);
  // Every launch asks: made once, then read without the lock (rank threads would contend on it).
  if (cudaMemPool_t made = pools[device].load(std::memory_order_acquire)) {
    *out = made;
    return Status::Ok();
  }
  std::lock_guard<std::mutex> lock(mutex);
  if (!pools[device].load(std::memory_order_relaxed)) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    cudaMemPool_t pool = nullptr;
    LOOM_CUDA_TRY(cudaMemPoolCreate(&pool, &props));
    int no = 0;
    uint64_t kept = kKeptBytes;
    cudaError_t err = cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &no);
    if (err == cudaSuccess) err = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &kept);
    if (err != cudaSuccess) {
      cudaMemPoolDestroy(pool);
      return cudaStatus(err, "cudaMemPoolSetAttribute");
    }
    pools[device].store(pool, std::memory_order_release);
  }
  *out = pools[device].load(std::memory_order_relaxed);
  return Status::Ok();
}

StreamTemporaries::~StreamTemporaries() {
  for (void* p : blocks_) cudaFreeAsync(p, stream_);
}

Status StreamTemporaries::allocate(size_t bytes, char** out) {
  *out = nullptr;
  if (bytes == 0) return Status::Ok();
  void* p = nullptr;
  LOOM_CUDA_TRY(cudaMallocFromPoolAsync(&p, bytes, pool_, stream_));
  blocks_.push_back(p);
  *out = static_cast<char*>(p);
  return Status::Ok();
}

LaunchWorkspace::~LaunchWorkspace() {
  if (base_) cudaFree(base_);  // pool memory may be freed so; the launches that used it have ended
}

Status LaunchWorkspace::reserve(size_t bytes, cudaMemPool_t pool, cudaStream_t stream, char** base) {
  if (bytes > bytes_) {
    // Doubling, so that a run of growing operations grows it a few times, not at every call.
    const size_t want = std::max(bytes, bytes_ * 2);
    void* p = nullptr;
    LOOM_CUDA_TRY(cudaMallocFromPoolAsync(&p, want, pool, stream));
    if (base_) LOOM_CUDA_TRY(cudaFreeAsync(base_, stream));  // behind the launches that used it
    base_ = static_cast<char*>(p);
    bytes_ = want;
  }
  *base = base_;
  return Status::Ok();
}

KeptDeviceMemory::~KeptDeviceMemory() {
  if (!stream_) return;
  DeviceScope scope(device_);
  for (void* p : blocks_) cudaFreeAsync(p, stream_);
  cudaStreamDestroy(stream_);  // returns at once; the frees complete on their own
}

Status KeptDeviceMemory::allocate(size_t bytes, char** out) {
  *out = nullptr;
  if (bytes == 0) return Status::Ok();
  if (!stream_) LOOM_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  void* p = nullptr;
  LOOM_CUDA_TRY(cudaMallocFromPoolAsync(&p, bytes, pool_, stream_));
  blocks_.push_back(p);
  // Only this private stream: the allocation, never another rank's kernel.
  LOOM_CUDA_TRY(cudaStreamSynchronize(stream_));
  *out = static_cast<char*>(p);
  return Status::Ok();
}

Status KeptDeviceMemory::upload(const void* host, size_t bytes, char** out) {
  LOOM_TRY(allocate(bytes, out));
  return copy(*out, host, bytes);
}

Status KeptDeviceMemory::copy(char* to, const void* host, size_t bytes) {
  if (bytes == 0) return Status::Ok();
  LOOM_CUDA_TRY(cudaMemcpyAsync(to, host, bytes, cudaMemcpyHostToDevice, stream_));
  LOOM_CUDA_TRY(cudaStreamSynchronize(stream_));  // only this private stream
  return Status::Ok();
}

}  // namespace loom::device
