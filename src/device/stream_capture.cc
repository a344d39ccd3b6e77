#include "device/stream_capture.h"

#include <cuda_runtime_api.h>

#include "device/memory_kind.h"

namespace loom::device {

Status captureOf(loomStream_t stream, StreamCapture* out) {
  *out = StreamCapture{};
  if (!stream || !cudaUsable()) return Status::Ok();  // the legacy stream cannot be captured while other work uses it
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

}  // namespace loom::device
