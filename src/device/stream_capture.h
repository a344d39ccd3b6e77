// CUDA graph capture (stream capture) seen from the device layer. Plan kernels can be captured
// (plan_kernels.h says how); core refuses everything else on a capturing stream with loomInvalidUsage
// before anything is enqueued (core/run/group.cc, with the seam's captureOf), so that the capture stays
// valid and the caller learns why, instead of a capture invalidated by Loom's host-side waits or a
// graph that replays work whose host side (staging, progress thread) is long gone. CUDA builds only.
#pragma once

#include "device/device_layer.h"

namespace loom::device {

// While it lives, this thread may make CUDA calls that a global-mode capture would otherwise refuse
// (pinned and stream-ordered allocations the launch needs, event queries): the thread's capture mode
// is relaxed (cudaThreadExchangeStreamCaptureMode), and restored after.
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode();
  ~RelaxedCaptureMode();
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  int previous_;
};

}  // namespace loom::device
