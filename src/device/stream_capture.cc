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
    StreamCapture capture;
    LOOM_TRY(captureOf(op.stream, &capture));
    if (capture.active)
      return errorStatus(loomInvalidUsage,
                         "{} on {}: its stream is being captured into a CUDA graph, which Loom supports only for "
                         "device buffers run as plan kernels (LOOM_DEVICE_PLANS, src/kernels/cuda/README.md); this "
                         "operation would be staged through host memory: call it outside the capture (nothing was "
                         "enqueued)",
                         operationName(op), op.comm->describe());
  }
  return Status::Ok();
}

Status captureOf(loomStream_t stream, StreamCapture* out) {
  *out = StreamCapture{};
  if (!stream) return Status::Ok();  // the legacy stream cannot be captured while other work uses it
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  if (cudaStreamGetCaptureInfo(stream, &status, &id) != cudaSuccess) {
    cudaGetLastError();
    return Status::Ok();  // not a stream CUDA knows: the operation's own checks say what is wrong with it
  }
  if (status == cudaStreamCaptureStatusInvalidated)
    return errorStatus(loomInvalidUsage, "the stream's CUDA graph capture was already invalidated");
  out->active = status == cudaStreamCaptureStatusActive;
  out->id = id;
  return Status::Ok();
}

RelaxedCaptureMode::RelaxedCaptureMode() {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  previous_ = static_cast<int>(mode);
}

RelaxedCaptureMode::~RelaxedCaptureMode() {
  auto mode = static_cast<cudaStreamCaptureMode>(previous_);
  cudaThreadExchangeStreamCaptureMode(&mode);
}

}  // namespace loom
