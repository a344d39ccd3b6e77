// What a queued operation waits for before it may start, and whom it tells when it ended: part of the
// device layer's seam (device_layer.h). Device buffers staged on a CUDA stream (staging.h) use it: the
// operation may start once the stream has copied its input to pinned memory, and its end releases the
// stream, which then copies the output back. Core's progress thread (core/run/async_engine.h) polls
// ready() and calls finish() once. Plain C++, in every build.
#pragma once

#include <atomic>

#include "base/status.h"

namespace loom::device {

class OperationGate {
 public:
  virtual ~OperationGate() = default;
  // Sets *isReady when the operation's inputs are in place; cheap, polled. An error fails the
  // communicator (the inputs will never be there).
  virtual Status ready(bool* isReady) = 0;
  // Called once, with the operation's outcome. Later calls do nothing.
  void finish(const Status& outcome) {
    if (!finished_.exchange(true)) onFinish(outcome);
  }
  bool finished() const { return finished_.load(); }
  // Set when the progress thread queued the operation (it then finishes the gate); a call that
  // failed before queuing it leaves it unclaimed, and the operation never runs.
  void claim() { claimed_.store(true); }
  bool claimed() const { return claimed_.load(); }

 protected:
  virtual void onFinish(const Status& outcome) = 0;

 private:
  std::atomic<bool> finished_{false};
  std::atomic<bool> claimed_{false};
};

}  // namespace loom::device
