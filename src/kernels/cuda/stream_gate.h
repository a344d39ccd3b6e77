// Holding a CUDA stream until the host says so: the stream half of asynchronous staging
// (device/staging.cc). The stream runs a one-thread kernel that waits for a 32-bit word in
// pinned, device-mapped host memory to become non-zero; the host sets the word when the operation's
// host part ended. Work enqueued behind the gate (the copy of the output back to the device) starts
// only then, while the caller's thread has long returned.
//
// The words themselves: device/host_flags.h. CUDA builds only; this header includes no CUDA
// header.
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_reduce.h"  // Stream

namespace loom::cuda {

// Enqueues the wait on `stream`: it ends when *deviceFlag (the device address of a mapped host
// word) is non-zero. Returns a cudaError_t value (0: enqueued).
int enqueueHostFlagWait(const volatile uint32_t* deviceFlag, Stream stream);

// Loads the gate's kernel on the current device now rather than at its first launch (lazy loading may
// synchronize the context then). Returns a cudaError_t value.
int loadStreamGateKernel();

}  // namespace loom::cuda
