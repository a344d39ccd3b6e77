// CUDA driver functions, looked up once through the runtime: libcuda is not linked (the runtime is
// static and finds the driver at run time), so the driver API is reached by entry point. CUDA builds only.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <string>

namespace loom::device {

// The driver's `name` (its CUDA 12.0 version), null when the driver lacks it.
template <class Fn>
Fn driverEntryPoint(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess)
    fn = nullptr;
  cudaGetLastError();
  return reinterpret_cast<Fn>(fn);
}

// A driver result's name ("CUDA_ERROR_INVALID_VALUE"), or its number where the driver cannot name it.
inline std::string driverError(CUresult r) {
  using ErrorName = CUresult (*)(CUresult, const char**);
  static const ErrorName name = driverEntryPoint<ErrorName>("cuGetErrorName");
  const char* text = nullptr;
  if (name && name(r, &text) == CUDA_SUCCESS && text) return text;
  return "CUresult " + std::to_string(static_cast<int>(r));
}

}  // namespace loom::device
