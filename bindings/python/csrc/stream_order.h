// CUDA calls are ordered on torch's current stream, as with ProcessGroupNCCL: Loom enqueues its
// work on that stream, and an event recorded after it tells when the stream passed the operation.
// Everything goes through c10's device-generic interfaces, so the extension needs no CUDA headers
// and builds against a CUDA torch on a machine without a GPU.
#pragma once

#include <optional>

#include <c10/core/DeviceGuard.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>
#include <loom.h>

namespace loomtorch {

// For the duration of one call: makes its CUDA device current and names torch's current stream
// there as the call's stream. CPU calls get no stream (Loom's NULL).
class CallStream {
 public:
  explicit CallStream(c10::Device device);
  loomStream_t loom() const { return loom_; }
  const std::optional<c10::Stream>& cuda() const { return stream_; }

 private:
  c10::OptionalDeviceGuard guard_;
  std::optional<c10::Stream> stream_;
  loomStream_t loom_ = nullptr;
};

// The point on a CUDA stream right after one operation (and its copy-backs).
class StreamMark {
 public:
  explicit StreamMark(c10::Stream stream) : stream_(stream) {}
  const c10::Stream& stream() const { return stream_; }
  // Once, on the stream, after the operation was enqueued there.
  void record() { event_.record(stream_); }
  // An unrecorded event counts as passed, so ask only after record().
  bool passed() const { return event_.query(); }
  void synchronize() const { event_.synchronize(); }
  // Work enqueued later on the caller's current stream (on this device) runs after the mark.
  void blockCurrentStream() const;

 private:
  c10::Stream stream_;
  c10::Event event_{c10::DeviceType::CUDA};
};

// A stream of torch's pool on `device`, for events that must not wait for the work users keep
// enqueueing on their own streams.
c10::Stream poolStream(c10::Device device);

}  // namespace loomtorch
