// CUDA reduction and copy kernels for every loomDataType_t and operator: the device twin of
// kernels/cpu/reduce.h, with the same ReduceOp and the same results bit for bit (element_ops.cuh says
// how). Each call enqueues one kernel on `stream` and returns at once.
//
// This header includes no CUDA header, so any C++ file may use it; Stream is cudaStream_t's type
// (nullptr is the legacy default stream). All pointers must be device-accessible (device memory,
// or pinned/managed host memory). Only built when the CUDA feature is on (LOOM_HAVE_CUDA).
#pragma once

#include <cstddef>

#include "kernels/cpu/reduce.h"
#include "loom.h"

namespace loom::cuda {

using Stream = struct CUstream_st*;  // == cudaStream_t == loomStream_t

// dst[i] = a[i] (op) b[i], then the post-operation when finalize is set. dst may alias a or b
// exactly. Returns a cudaError_t value: 0 when the launch was accepted (kernel errors surface on the
// stream later), cudaErrorInvalidValue for an unknown dtype.
int reduceArraysAsync(void* dst, const void* a, const void* b, size_t count, loomDataType_t dtype,
                      const ReduceOp& op, bool finalize, Stream stream);

// dst[i] = post(src[i]) when finalize is set (a kernel), else a device-to-device copy; dst may equal
// src. Returns a cudaError_t value as reduceArraysAsync does.
int copyArrayAsync(void* dst, const void* src, size_t count, loomDataType_t dtype, const ReduceOp& op,
                   bool finalize, Stream stream);

// Loads every kernel of this file on the current device (cudaFuncGetAttributes): with lazy loading
// (CUDA >= 12.2) a kernel's first launch may otherwise synchronize the context. Returns a cudaError_t value.
int loadElementwiseKernels();

// The grid reduceArraysAsync uses for `count` elements of elemSize bytes on the current device.
struct LaunchShape {
  unsigned blocks = 1;
  unsigned threads = 1;
};
LaunchShape launchShape(size_t count, size_t elemSize);

}  // namespace loom::cuda
