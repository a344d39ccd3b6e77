#include "device/stream_pool.h"

#include <cstdint>
#include <mutex>

#include "device/memory_kind.h"

namespace loom::device {

Status launchPool(int device, cudaMemPool_t* out) {
  constexpr int kMaxDevices = 64;
  static std::mutex mutex;
  static cudaMemPool_t pools[kMaxDevices] = {};
  if (device < 0 || device >= kMaxDevices) return errorStatus(loomInvalidArgument, "GPU {} is out of range", device);
  std::lock_guard<std::mutex> lock(mutex);
  if (!pools[device]) {
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
    pools[device] = pool;
  }
  *out = pools[device];
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

}  // namespace loom::device
