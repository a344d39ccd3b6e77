// A CUDA event owned by the host code that waits on it: recorded on a stream, queried without
// blocking (the progress thread's way of watching a stream), created on first use. Includes the
// CUDA runtime header: for the CUDA build's .cc files only.
#pragma once

#include <cuda_runtime_api.h>

#include "base/status.h"
#include "device/memory_kind.h"

namespace loom::device {

class EventHandle {
 public:
  EventHandle() = default;
  ~EventHandle() {
    if (event_) cudaEventDestroy(event_);
  }
  EventHandle(const EventHandle&) = delete;
  EventHandle& operator=(const EventHandle&) = delete;
  Status record(cudaStream_t stream) {
    if (!event_) LOOM_CUDA_TRY(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
    LOOM_CUDA_TRY(cudaEventRecord(event_, stream));
    return Status::Ok();
  }
  // Sets *done when the stream passed the event.
  Status query(bool* done) const {
    const cudaError_t st = cudaEventQuery(event_);
    *done = st == cudaSuccess;
    if (st != cudaSuccess && st != cudaErrorNotReady) return cudaStatus(st, "cudaEventQuery");
    return Status::Ok();
  }
  // Makes `stream` wait for the event (nothing when it was never recorded).
  Status orderBefore(cudaStream_t stream) const {
    if (event_) LOOM_CUDA_TRY(cudaStreamWaitEvent(stream, event_, 0));
    return Status::Ok();
  }
  void wait() const {
    if (event_) cudaEventSynchronize(event_);
  }
  bool recorded() const { return event_ != nullptr; }

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace loom::device
