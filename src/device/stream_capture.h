// CUDA graph capture (stream capture) of collectives. Plan kernels can be captured (core/device_plans.h
// says how); everything else is refused with loomInvalidUsage before anything is enqueued, so the
// capture stays valid and the caller learns why, instead of a capture invalidated by Loom's host-side
// waits or a graph that replays work whose host side (staging, progress thread) is long gone.
#pragma once

#include <vector>

#include "base/status.h"
#include "core/operation.h"

namespace loom {

#ifdef LOOM_HAVE_CUDA

// Ok, or loomInvalidUsage naming the first operation whose stream is capturing (for the paths that
// cannot be captured: staging through host memory, host buffers).
Status refuseCapturingStreams(const std::vector<Operation>& ops);

// Whether `stream` is being captured, and into which capture sequence.
struct StreamCapture {
  bool active = false;
  unsigned long long id = 0;
};
Status captureOf(loomStream_t stream, StreamCapture* out);

// While it lives, this thread may make CUDA calls that a global-mode capture would otherwise refuse
// (pinned and stream-ordered allocations the launch needs): cudaThreadExchangeStreamCaptureMode to
// relaxed, and back.
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode();
  ~RelaxedCaptureMode();
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  int previous_;
};

#else

inline Status refuseCapturingStreams(const std::vector<Operation>&) { return Status::Ok(); }

#endif

}  // namespace loom
