// The plan kernel (plan_launch.h): plan_interpreter.cuh's runLane on a GPU, one block per lane. One
// kernel per element type (12, times the sm_80/sm_90/PTX targets); the operator is a run-time value
// in the encoded plan, as in device_kernels.cu, so the build does not grow with dtype x operator.
#include <cuda_runtime.h>

#include <cuda/atomic>
#include <algorithm>
#include <mutex>

#include "kernels/cuda/kernel_loading.cuh"
#include "kernels/cuda/plan_interpreter.cuh"
#include "kernels/cuda/plan_launch.h"

namespace loom::cuda {
namespace {

// The policy plan_interpreter.cuh runs under on a GPU: the block's threads are the lane's workers;
// counters are accessed at their FIFO's scope: system where the peer that writes them may be another
// GPU (over NVLink/PCIe), the host or another process, the GPU's own where both ends run on it
// (FifoScope); the abort word, in mapped host memory, at system scope. Slot data moves with plain loads
// and stores by every thread; __syncthreads orders them after thread 0's acquire and before its
// release, which the PTX memory model makes enough (causality order runs through the CTA barrier), as
// in NCCL's primitives.
class DevicePlatform {
 public:
  __device__ explicit DevicePlatform(LaneShared* shared) : shared_(shared) {}

  __device__ uint32_t worker() const { return threadIdx.x; }
  __device__ uint32_t workers() const { return blockDim.x; }
  __device__ void barrier() { __syncthreads(); }
  __device__ LaneShared& shared() { return *shared_; }

  __device__ static uint64_t loadAcquire(const uint64_t* p, FifoScope scope) {
    return scope == FifoScope::Gpu ? gpuWord(p).load(::cuda::memory_order_acquire)
                                   : word(p).load(::cuda::memory_order_acquire);
  }
  __device__ static uint64_t loadRelaxed(const uint64_t* p, FifoScope scope) {
    return scope == FifoScope::Gpu ? gpuWord(p).load(::cuda::memory_order_relaxed)
                                   : word(p).load(::cuda::memory_order_relaxed);
  }
  __device__ static void storeRelease(uint64_t* p, uint64_t v, FifoScope scope) {
    if (scope == FifoScope::Gpu) {
      gpuWord(p).store(v, ::cuda::memory_order_release);
    } else {
      word(p).store(v, ::cuda::memory_order_release);
    }
  }
  __device__ static void storeRelaxed(uint64_t* p, uint64_t v, FifoScope scope) {
    if (scope == FifoScope::Gpu) {
      gpuWord(p).store(v, ::cuda::memory_order_relaxed);
    } else {
      word(p).store(v, ::cuda::memory_order_relaxed);
    }
  }
  __device__ static uint32_t loadFlag(const uint32_t* p) {
    return ::cuda::atomic_ref<uint32_t, ::cuda::thread_scope_system>(*const_cast<uint32_t*>(p))
        .load(::cuda::memory_order_acquire);
  }
  // One fence orders everything before it ahead of both stores (a release store is a fence and a store).
  __device__ static void storeReleaseBoth(uint64_t* a, uint64_t va, uint64_t* b, uint64_t vb, FifoScope scope) {
    if (scope == FifoScope::Gpu) {
      ::cuda::atomic_thread_fence(::cuda::memory_order_release, ::cuda::thread_scope_device);
    } else {
      ::cuda::atomic_thread_fence(::cuda::memory_order_release, ::cuda::thread_scope_system);
    }
    storeRelaxed(a, va, scope);
    storeRelaxed(b, vb, scope);
  }
  __device__ static uint64_t fetchAdd(uint64_t* p, uint64_t v, FifoScope scope) {
    return scope == FifoScope::Gpu ? gpuWord(p).fetch_add(v, ::cuda::memory_order_acq_rel)
                                   : word(p).fetch_add(v, ::cuda::memory_order_acq_rel);
  }
  __device__ static bool compareExchange(uint64_t* p, uint64_t expected, uint64_t desired, FifoScope scope) {
    unsigned long long e = expected;
    const auto d = static_cast<unsigned long long>(desired);
    return scope == FifoScope::Gpu
               ? gpuWord(p).compare_exchange_strong(e, d, ::cuda::memory_order_acq_rel, ::cuda::memory_order_acquire)
               : word(p).compare_exchange_strong(e, d, ::cuda::memory_order_acq_rel, ::cuda::memory_order_acquire);
  }
  __device__ static void raiseFlag(uint32_t* p) {
    ::cuda::atomic_ref<uint32_t, ::cuda::thread_scope_system>(*p).store(1, ::cuda::memory_order_release);
  }
  __device__ static void noteWaiting(uint32_t* p, uint32_t v) {
    ::cuda::atomic_ref<uint32_t, ::cuda::thread_scope_system>(*p).store(v, ::cuda::memory_order_relaxed);
  }

  __device__ static uint64_t nowNs() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  }
  // Spin first: a plan kernel's block has its SM to itself (its registers allow one block per SM), so a
  // sleep frees issue slots for nobody and only adds its wake-up to the wait. Each round is a poll
  // across the fabric (about half a microsecond), so 32 rounds spin for about 15 us, longer than a
  // step's handshake takes; only a lane left waiting longer (its peer far behind) backs off, to at most
  // a microsecond per round, sparing the memory system its polls.
  __device__ static void pause(uint32_t round) {
    constexpr uint32_t kSpinRounds = 32;
    if (round >= kSpinRounds) __nanosleep(round < kSpinRounds + 5 ? 64u << (round - kSpinRounds) : 1024u);
  }

 private:
  using Word = ::cuda::atomic_ref<unsigned long long, ::cuda::thread_scope_system>;
  using GpuWord = ::cuda::atomic_ref<unsigned long long, ::cuda::thread_scope_device>;
  __device__ static Word word(const uint64_t* p) {
    return Word(*reinterpret_cast<unsigned long long*>(const_cast<uint64_t*>(p)));
  }
  __device__ static GpuWord gpuWord(const uint64_t* p) {
    return GpuWord(*reinterpret_cast<unsigned long long*>(const_cast<uint64_t*>(p)));
  }
  LaneShared* shared_;
};

// The launch's arguments are a kernel parameter (in the constant bank): a call of a shape whose
// encoding is on the device already copies nothing to it.
template <class E>
__global__ void __launch_bounds__(kPlanThreads) planSequenceKernel(const __grid_constant__ DeviceLaunchArgs args) {
  __shared__ LaneShared shared;
  DevicePlatform platform(&shared);
  runSequence<E>(args, blockIdx.x, platform);
}

// Blocks of the plan kernel of each dtype that `device` holds resident at once, found once per device
// (cudaOccupancyMaxActiveBlocksPerMultiprocessor costs microseconds, and every launch checks it).
constexpr int kMostDevices = 64;
uint32_t residentCapacity[kMostDevices][loomNumTypes];  // 0: not found yet
std::once_flag capacityFound[kMostDevices];

cudaError_t findCapacity(int device) {
  int sms = 0;
  cudaError_t err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  for (int d = 0; d < loomNumTypes && err == cudaSuccess; ++d)
    withElem(static_cast<loomDataType_t>(d), [&](auto elem) {
      int perSm = 0;
      err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, planSequenceKernel<decltype(elem)>, kPlanThreads, 0);
      residentCapacity[device][d] = static_cast<uint32_t>(sms) * static_cast<uint32_t>(perSm);
    });
  return err;
}

// Resident blocks of `dtype`'s plan kernel on the current device, into *blocks.
cudaError_t capacityOf(loomDataType_t dtype, uint32_t* blocks) {
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  if (device < 0 || device >= kMostDevices || dtype < 0 || dtype >= loomNumTypes) return cudaErrorInvalidValue;
  std::call_once(capacityFound[device], [&] { err = findCapacity(device); });
  if (err != cudaSuccess) return err;
  *blocks = residentCapacity[device][dtype];
  return *blocks > 0 ? cudaSuccess : cudaErrorInvalidValue;
}

}  // namespace

int planKernelCapacity(int device, uint32_t* blocks) {
  if (device < 0 || device >= kMostDevices) return cudaErrorInvalidValue;
  cudaError_t err = cudaSuccess;
  std::call_once(capacityFound[device], [&] { err = findCapacity(device); });
  if (err != cudaSuccess) return err;
  uint32_t fewest = residentCapacity[device][0];
  for (int d = 1; d < loomNumTypes; ++d) fewest = std::min(fewest, residentCapacity[device][d]);
  *blocks = fewest;
  return cudaSuccess;
}

int loadPlanKernels() {
  return loadKernelPerDtype([](auto elem) { return planSequenceKernel<decltype(elem)>; });
}

int launchDevicePlanSequence(const DeviceLaunchArgs& args, uint32_t blocks, loomDataType_t dtype, Stream stream) {
  if (blocks == 0) return cudaSuccess;
  if (!args.sequence) return cudaErrorInvalidValue;
  uint32_t capacity = 0;
  cudaError_t err = capacityOf(dtype, &capacity);
  if (err != cudaSuccess) return err;
  if (blocks > capacity) return cudaErrorCooperativeLaunchTooLarge;
  bool known = withElem(dtype, [&](auto elem) {
    planSequenceKernel<decltype(elem)><<<blocks, kPlanThreads, 0, stream>>>(args);
    err = cudaGetLastError();
  });
  if (!known) return cudaErrorInvalidValue;
  return err;
}

}  // namespace loom::cuda
