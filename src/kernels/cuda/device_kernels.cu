// The CUDA reduce/copy kernels (cuda_reduce.h). One kernel per element type (12 in all, times the
// sm_80/sm_90/PTX targets): the operator is a run-time switch, uniform across the grid, around the
// grid-stride loops of element_ops.cuh. Each thread moves 16-byte vectors, two in flight at a time;
// 16- and 8-bit floats compute in float and round once.
#include <cuda_runtime.h>

#include <atomic>

#include "kernels/cuda/cuda_reduce.h"
#include "kernels/cuda/element_ops.cuh"
#include "kernels/cuda/kernel_loading.cuh"

namespace loom::cuda {
namespace {

constexpr unsigned kThreads = 512;
constexpr unsigned kBlocksPerSm = 4;  // 2048 resident threads per SM on sm_80 and sm_90
constexpr int kMaxDevices = 64;

template <class E>
__global__ void __launch_bounds__(kThreads) elementwiseKernel(const ElementwiseArgs args) {
  const size_t tid = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t nthreads = size_t(gridDim.x) * blockDim.x;
  elementwiseThread<E>(args, tid, nthreads);
}

// Multiprocessor count per device, read once (0: not read yet).
int multiprocessors() {
  static std::atomic<int> cache[kMaxDevices];
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) return 32;
  int sms = cache[device].load(std::memory_order_relaxed);
  if (sms == 0) {
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || sms <= 0) sms = 32;
    cache[device].store(sms, std::memory_order_relaxed);
  }
  return sms;
}

int launch(loomDataType_t dtype, const ElementwiseArgs& args, Stream stream) {
  if (args.count == 0) return cudaSuccess;
  bool known = false;
  withElem(dtype, [&](auto elem) {
    using E = decltype(elem);
    const LaunchShape shape = launchShape(args.count, sizeof(typename E::Storage));
    elementwiseKernel<E><<<shape.blocks, shape.threads, 0, stream>>>(args);
    known = true;
  });
  if (!known) return cudaErrorInvalidValue;
  return static_cast<int>(cudaGetLastError());
}

size_t elemSizeOf(loomDataType_t dtype) {
  size_t size = 0;
  withElem(dtype, [&](auto elem) { size = sizeof(typename decltype(elem)::Storage); });
  return size;
}

}  // namespace

int loadElementwiseKernels() {
  return loadKernelPerDtype([](auto elem) { return elementwiseKernel<decltype(elem)>; });
}

LaunchShape launchShape(size_t count, size_t elemSize) {
  const size_t perThread = kVectorBytes / elemSize * kUnroll;  // elements per thread per iteration
  const size_t wanted = (count + perThread * kThreads - 1) / (perThread * kThreads);
  const size_t cap = size_t(multiprocessors()) * kBlocksPerSm;
  LaunchShape shape;
  shape.threads = kThreads;
  shape.blocks = static_cast<unsigned>(wanted < 1 ? 1 : (wanted > cap ? cap : wanted));
  return shape;
}

int reduceArraysAsync(void* dst, const void* a, const void* b, size_t count, loomDataType_t dtype,
                      const ReduceOp& op, bool finalize, Stream stream) {
  const size_t elemSize = elemSizeOf(dtype);
  if (elemSize == 0 || !a || !b) return cudaErrorInvalidValue;
  return launch(dtype, makeArgs(dst, a, b, count, elemSize, op, finalize), stream);
}

int copyArrayAsync(void* dst, const void* src, size_t count, loomDataType_t dtype, const ReduceOp& op,
                   bool finalize, Stream stream) {
  const size_t elemSize = elemSizeOf(dtype);
  if (elemSize == 0 || !src) return cudaErrorInvalidValue;
  if (!finalize || op.post == PostOpKind::None) {
    if (dst == src || count == 0) return cudaSuccess;
    return static_cast<int>(cudaMemcpyAsync(dst, src, count * elemSize, cudaMemcpyDefault,
                                            stream));
  }
  return launch(dtype, makeArgs(dst, src, nullptr, count, elemSize, op, finalize), stream);
}

}  // namespace loom::cuda
