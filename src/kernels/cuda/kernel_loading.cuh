// Loading kernels before their first launch. With lazy loading (the default since CUDA 12.2) a kernel's
// module is loaded at its first launch, which may synchronize the context: a deadlock when another
// rank's plan kernel in this process already waits for this rank's launch. cudaFuncGetAttributes
// loads the kernel's module (as NCCL does at init); .cu files only.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/element_ops.cuh"

namespace loom::cuda {

// Loads the kernel `kernelOf(elem)` returns for every element type; a cudaError_t value.
template <class KernelOf>
int loadKernelPerDtype(KernelOf kernelOf) {
  cudaError_t err = cudaSuccess;
  for (int d = 0; d < loomNumTypes && err == cudaSuccess; ++d)
    withElem(static_cast<loomDataType_t>(d), [&](auto elem) {
      cudaFuncAttributes attributes{};
      err = cudaFuncGetAttributes(&attributes, kernelOf(elem));
    });
  return static_cast<int>(err);
}

}  // namespace loom::cuda
