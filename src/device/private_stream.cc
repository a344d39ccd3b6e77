#include "device/private_stream.h"

#include "device/memory_kind.h"

namespace loom::device {

Status runOnPrivateStream(const std::function<cudaError_t(cudaStream_t)>& work, const char* what) {
  cudaStream_t stream = nullptr;
  LOOM_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaError_t err = work(stream);
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  cudaStreamDestroy(stream);
  return cudaStatus(err, what);
}

}  // namespace loom::device
