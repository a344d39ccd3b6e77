// Memory kinds (docs/DESIGN.md): is a buffer host memory or CUDA device memory? Asked per pointer, per
// call. The first question also asks whether CUDA is usable at all in this process (the runtime is
// linked statically and finds the driver, libcuda.so, only now); when it is not (no driver, no GPU,
// LOOM_CUDA=0) the answer is cached and every later pointer is host memory without a CUDA call.
// cudaUsable, MemoryKind and MemoryInfo are the seam's (device_layer.h).
//
// CUDA builds only; this header includes no CUDA header.
#pragma once

#include <string>

#include "base/status.h"
#include "device/device_layer.h"

namespace loom::device {

// What `p` points to. A failed query (a pointer CUDA does not know, or a CUDA error such as using
// CUDA in a child forked after the parent initialized it) is host memory.
MemoryInfo queryMemory(const void* p);
inline bool isDeviceMemory(const void* p) { return queryMemory(p).kind == MemoryKind::Device; }

// Whether `p` lies in an allocation that peer access (cudaDeviceEnablePeerAccess) opens to the other
// GPUs: cudaMalloc's are; stream-ordered pools' (cudaMallocAsync) and cuMem's are not unless their
// owner granted access. Asked of the driver (cuPointerGetAttribute, found at run time); false when
// it cannot say.
bool coveredByPeerAccess(const void* p);

// The allocation holding `p` (cuMemGetAddressRange): its start and size. An error when the driver does
// not know `p`.
Status allocationOf(const void* p, const char** base, size_t* bytes);

// A cudaError_t value as a Status: Ok for cudaSuccess, else "cudaMemcpyAsync: cudaErrorInvalidValue
// (invalid argument)" as loomUnhandledCudaError.
Status cudaStatus(int cudaError, const char* what);
#define LOOM_CUDA_TRY(call)                                                  \
  do {                                                                       \
    int loom_cuda_err_ = static_cast<int>(call);                             \
    if (loom_cuda_err_ != 0) return ::loom::device::cudaStatus(loom_cuda_err_, #call); \
  } while (0)

// Makes `device` current for the scope and restores the previous one (no-op for device < 0).
class DeviceScope {
 public:
  explicit DeviceScope(int device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  // The cudaSetDevice result (0 = success).
  int error() const { return error_; }

 private:
  int previous_ = -1;
  int error_ = 0;
};

}  // namespace loom::device
