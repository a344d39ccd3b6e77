// The stream gate (stream_gate.h). One thread polls the mapped host word with volatile loads (each
// one crosses PCIe, so it backs off with __nanosleep up to ~2 us between polls).
#include <cuda_runtime.h>

#include "kernels/cuda/stream_gate.h"

namespace loom::cuda {
namespace {

__global__ void waitForHostFlag(const volatile uint32_t* flag) {
  unsigned sleepNs = 64;
  while (*flag == 0u) {
    __nanosleep(sleepNs);
    if (sleepNs < 2048) sleepNs *= 2;
  }
  // Later work on the stream (copies reading the pinned output) must see what the host wrote before
  // it set the flag.
  __threadfence_system();
}

}  // namespace

int enqueueHostFlagWait(const volatile uint32_t* deviceFlag, Stream stream) {
  waitForHostFlag<<<1, 1, 0, stream>>>(deviceFlag);
  return static_cast<int>(cudaGetLastError());
}

int loadStreamGateKernel() {
  cudaFuncAttributes attributes{};
  return static_cast<int>(cudaFuncGetAttributes(&attributes, waitForHostFlag));
}

}  // namespace loom::cuda
