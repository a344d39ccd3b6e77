// FakeCuda: the host API of src/kernels/cuda (cuda_reduce.h, plan_launch.h, stream_gate.h) on the fake's
// streams. Each "kernel" runs the kernels' own __host__ __device__ code on host threads: the
// elementwise loops of element_ops.cuh, and the plan interpreter with one host thread per thread block
// (all of a launch's blocks run at once, as resident blocks do, which is what lets lanes wait on each
// other). What differs from a GPU is the speed, and the memory model of the host.
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "fake_counters.h"
#include "fake_device.h"
#include "kernels/cuda/cuda_reduce.h"
#include "kernels/cuda/element_ops.cuh"
#include "kernels/cuda/host_lane_platform.h"
#include "kernels/cuda/plan_launch.h"
#include "kernels/cuda/stream_gate.h"

namespace loom::cuda {
namespace {

constexpr size_t kEmulatedThreads = 64;  // how many GPU threads the emulation splits a loop as

// Lazy loading, the default since CUDA 12.2 (and modelled whatever CUDA_MODULE_LOADING says, so that
// Loom's own loading is what the tests rely on): the first launch of a kernel not loaded yet loads
// its module, which may synchronize the context, so it waits for every stream of the device.
struct KernelFamily {
  std::atomic<bool> loaded{false};
  void launching() {
    if (!loaded.exchange(true)) fakecuda::synchronizeDevice(fakecuda::currentDevice());
  }
};
KernelFamily elementwiseKernels, streamGateKernel, planKernels;

size_t elemSizeOf(loomDataType_t dtype) {
  size_t size = 0;
  withElem(dtype, [&](auto elem) { size = sizeof(typename decltype(elem)::Storage); });
  return size;
}

int enqueueElementwise(loomDataType_t dtype, const ElementwiseArgs& args, Stream stream) {
  if (args.count == 0) return cudaSuccess;
  elementwiseKernels.launching();
  auto work = [dtype, args] {
    withElem(dtype, [&](auto elem) { emulateElementwise<decltype(elem)>(args, kEmulatedThreads); });
  };
  return fakecuda::enqueue(stream, work) ? cudaSuccess : fakecuda::fail(cudaErrorInvalidResourceHandle);
}

}  // namespace

int loadElementwiseKernels() {
  FAKECUDA_ENTRY();
  elementwiseKernels.loaded = true;
  return cudaSuccess;
}
int loadStreamGateKernel() {
  FAKECUDA_ENTRY();
  streamGateKernel.loaded = true;
  return cudaSuccess;
}
int loadPlanKernels() {
  FAKECUDA_ENTRY();
  planKernels.loaded = true;
  return cudaSuccess;
}

LaunchShape launchShape(size_t, size_t) { return LaunchShape{1, static_cast<unsigned>(kEmulatedThreads)}; }

int reduceArraysAsync(void* dst, const void* a, const void* b, size_t count, loomDataType_t dtype, const ReduceOp& op,
                      bool finalize, Stream stream) {
  FAKECUDA_ENTRY();
  const size_t elemSize = elemSizeOf(dtype);
  if (elemSize == 0 || !a || !b) return cudaErrorInvalidValue;
  return enqueueElementwise(dtype, makeArgs(dst, a, b, count, elemSize, op, finalize), stream);
}

int copyArrayAsync(void* dst, const void* src, size_t count, loomDataType_t dtype, const ReduceOp& op, bool finalize,
                   Stream stream) {
  FAKECUDA_ENTRY();
  const size_t elemSize = elemSizeOf(dtype);
  if (elemSize == 0 || !src) return cudaErrorInvalidValue;
  if (!finalize || op.post == PostOpKind::None) {
    if (dst == src || count == 0) return cudaSuccess;
    return static_cast<int>(cudaMemcpyAsync(dst, src, count * elemSize, cudaMemcpyDefault, stream));
  }
  return enqueueElementwise(dtype, makeArgs(dst, src, nullptr, count, elemSize, op, finalize), stream);
}

int enqueueHostFlagWait(const volatile uint32_t* deviceFlag, Stream stream) {
  FAKECUDA_ENTRY();
  streamGateKernel.launching();
  auto wait = [deviceFlag] {
    while (std::atomic_ref<const uint32_t>(*const_cast<const uint32_t*>(deviceFlag)).load(std::memory_order_acquire) == 0)
      std::this_thread::sleep_for(std::chrono::microseconds(20));
  };
  return fakecuda::enqueue(stream, wait) ? cudaSuccess : fakecuda::fail(cudaErrorInvalidResourceHandle);
}

int planKernelCapacity(int device, uint32_t* blocks) {
  FAKECUDA_ENTRY();
  if (device < 0 || device >= fakecuda::deviceCount()) return cudaErrorInvalidDevice;
  *blocks = fakecuda::residentBlocks();
  return cudaSuccess;
}

int launchDevicePlanSequence(const DeviceLaunchArgs& args, uint32_t blocks, loomDataType_t dtype, Stream stream) {
  FAKECUDA_ENTRY();
  if (blocks == 0) return cudaSuccess;
  if (!args.sequence || elemSizeOf(dtype) == 0) return cudaErrorInvalidValue;
  if (blocks > fakecuda::residentBlocks()) return cudaErrorCooperativeLaunchTooLarge;
  planKernels.launching();
  const std::chrono::milliseconds tail = fakecuda::planKernelTail();
  auto kernel = [args, blocks, dtype, tail] {  // the arguments by value, as a kernel's parameters
    std::vector<std::thread> threads;
    for (uint32_t b = 0; b < blocks; ++b)
      threads.emplace_back([&args, b, dtype] {
        HostLane lane(1);
        HostLanePlatform platform(&lane, 0);
        withElem(dtype, [&](auto elem) { runSequence<decltype(elem)>(args, b, platform); });
      });
    for (std::thread& t : threads) t.join();
    std::this_thread::sleep_for(tail);
  };
  return fakecuda::enqueue(stream, kernel) ? cudaSuccess : fakecuda::fail(cudaErrorInvalidResourceHandle);
}

}  // namespace loom::cuda
