// Compiled only with the CUDA feature; listed in src/kernels/cuda/meson.build with the other CUDA-only
// parts of core.
#include "core/stream_capture.h"

#include <cuda_runtime_api.h>

#include "core/communicator.h"
#include "kernels/cuda/memory_kind.h"

namespace loom {

Status refuseCapturingStreams(const std::vector<Operation>& ops) {
  if (!cuda::cudaUsable()) return Status::Ok();
  for (const Operation& op : ops) {
    if (!op.stream) continue;  // the legacy stream cannot be captured while other work uses it
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(reinterpret_cast<cudaStream_t>(op.stream), &status) != cudaSuccess) {
      cudaGetLastError();
      continue;  // not a stream CUDA knows: the operation's own checks say what is wrong with it
    }
    if (status != cudaStreamCaptureStatusNone)
      return errorStatus(loomInvalidUsage,
                         "{} on {}: its stream is being captured into a CUDA graph, which Loom does not support "
                         "yet; call it outside the capture (nothing was enqueued)",
                         operationName(op), op.comm->describe());
  }
  return Status::Ok();
}

}  // namespace loom
