// Staging of device buffers through pinned host memory (staging.h).
#include "device/staging.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <utility>
#include <vector>

#include "base/datatype.h"
#include "base/settings.h"
#include "device/comm_device.h"
#include "device/event_handle.h"
#include "device/memory_kind.h"
#include "device/pinned_pool.h"
#include "kernels/cuda/stream_gate.h"

namespace loom::device {
namespace {

// One pinned copy of a device range: the union of an operation's send and receive ranges when they
// overlap (in-place layouts keep their pointer relations), else one range each.
struct Region {
  const char* device = nullptr;
  size_t bytes = 0;
  int deviceId = -1;
  PinnedBlock pinned;

  bool contains(const void* p) const {
    auto* c = static_cast<const char*>(p);
    return c >= device && c <= device + bytes;
  }
  char* map(const void* p) const { return pinned.data() + (static_cast<const char*>(p) - device); }
};

// A copy between the device and its pinned twin, enqueued on the operation's stream.
struct Copy {
  char* to;
  const char* from;
  size_t bytes;
  int deviceId;
  loomStream_t stream;
  cudaMemcpyKind kind;
};

Status enqueueCopies(const std::vector<Copy>& copies) {
  for (const Copy& c : copies) {
    DeviceScope scope(c.deviceId);
    LOOM_CUDA_TRY(scope.error());
    LOOM_CUDA_TRY(cudaMemcpyAsync(c.to, c.from, c.bytes, c.kind, c.stream));
  }
  return Status::Ok();
}

// The staging of one operation.
class Staging {
 public:
  // Rewrites the call's device pointers to pinned copies and notes the copies in and out; enqueues
  // nothing. Managed memory is used in place (ordered by the operation's stream).
  Status prepare(StagedCall* call) {
    const MemoryInfo& send = call->placement.send;
    const MemoryInfo& recv = call->placement.recv;
    for (const MemoryInfo* m : {&send, &recv})
      if (m->kind != MemoryKind::Host && device_ < 0) device_ = m->device;
    stream_ = call->stream;
    const bool sendDev = send.kind == MemoryKind::Device, recvDev = recv.kind == MemoryKind::Device;
    if (!sendDev && !recvDev) return Status::Ok();

    const size_t sendBytes = call->sendBytes, recvBytes = call->recvBytes;
    const char* s = static_cast<const char*>(call->send);
    char* r = static_cast<char*>(call->recv);
    Region* sendRegion = nullptr;
    Region* recvRegion = nullptr;
    if (sendDev && recvDev && s < r + recvBytes && r < s + sendBytes) {
      const char* lo = std::min<const char*>(s, r);
      const char* hi = std::max<const char*>(s + sendBytes, r + recvBytes);
      LOOM_TRY(addRegion(lo, static_cast<size_t>(hi - lo), send.device, &sendRegion));
      recvRegion = sendRegion;
    } else {
      if (sendDev) LOOM_TRY(addRegion(s, sendBytes, send.device, &sendRegion));
      if (recvDev) LOOM_TRY(addRegion(r, recvBytes, recv.device, &recvRegion));
    }
    if (sendRegion)
      ins_.push_back(Copy{sendRegion->map(s), s, sendBytes, sendRegion->deviceId, stream_, cudaMemcpyDeviceToHost});
    if (recvRegion)
      outs_.push_back(Copy{r, recvRegion->map(r), recvBytes, recvRegion->deviceId, stream_, cudaMemcpyHostToDevice});
    // Pointers the call names but does not use on this rank (a non-root's in-place recvbuff) follow
    // along when they fall inside a staged range, so in-place relations hold on every rank.
    if (const char* p = remap(call->send, sendRegion, recvRegion)) call->send = p;
    if (char* p = remap(call->recv, recvRegion, sendRegion)) call->recv = p;
    return Status::Ok();
  }

  int device() const { return device_; }
  loomStream_t stream() const { return stream_; }

  Status enqueueCopyIn() const { return enqueueCopies(ins_); }
  Status enqueueCopyOut() const { return enqueueCopies(outs_); }
  Status synchronize() const {
    DeviceScope scope(device_);
    LOOM_CUDA_TRY(scope.error());
    LOOM_CUDA_TRY(cudaStreamSynchronize(stream_));
    return Status::Ok();
  }

 private:
  Status addRegion(const char* device, size_t bytes, int deviceId, Region** out) {
    auto region = std::make_unique<Region>();
    region->device = device;
    region->bytes = bytes;
    region->deviceId = deviceId;
    LOOM_TRY(region->pinned.acquire(bytes));
    *out = region.get();
    regions_.push_back(std::move(region));
    return Status::Ok();
  }

  static char* remap(const void* p, const Region* first, const Region* second) {
    if (!p) return nullptr;
    for (const Region* region : {first, second})
      if (region && region->contains(p)) return region->map(p);
    return nullptr;
  }

  std::vector<std::unique_ptr<Region>> regions_;
  std::vector<Copy> ins_;
  std::vector<Copy> outs_;
  int device_ = -1;
  loomStream_t stream_ = nullptr;
};

using Stagings = std::vector<std::unique_ptr<Staging>>;

// ---- Synchronous staging ----

// Enqueues `copies` of every operation, then waits for all their streams.
Status copyAndWait(const Stagings& stagings, Status (Staging::*copies)() const, const char* what) {
  for (const auto& s : stagings) LOOM_TRY(((*s).*copies)().withContext(what));
  for (const auto& s : stagings) LOOM_TRY(s->synchronize().withContext(what));
  return Status::Ok();
}

Status runSynchronous(std::span<StagedCall> calls, const Stagings& stagings, const HostPart& hostPart) {
  LOOM_TRY(copyAndWait(stagings, &Staging::enqueueCopyIn, "staging device buffers"));
  LOOM_TRY(hostPart(calls, true));
  return copyAndWait(stagings, &Staging::enqueueCopyOut, "copying results to device buffers");
}

// ---- Stream-ordered staging ----

// The progress thread's view of one operation's stream: ready once the stream copied the input to
// pinned memory (the event is recorded only after the operation was queued, so ready() first waits
// for arm()); finishing it opens the stream's gate whatever the outcome (after a failure the output is
// undefined, as in NCCL, and the communicator reports the error).
class StreamGate final : public OperationGate {
 public:
  StreamGate(int device, HostFlags::Flag flag) : device_(device), flag_(flag) {}
  Status ready(bool* isReady) override {
    *isReady = false;
    const int state = state_.load(std::memory_order_acquire);
    if (state == kBroken) return broken_;
    if (state != kArmed) return Status::Ok();
    DeviceScope scope(device_);
    LOOM_CUDA_TRY(scope.error());
    return inputsCopied_.query(isReady).withContext("waiting for a device input on its stream");
  }
  EventHandle& inputsCopied() { return inputsCopied_; }
  void arm() { state_.store(kArmed, std::memory_order_release); }
  // The stream work could not be enqueued: the operation fails with `why` when it comes up.
  void breakWith(const Status& why) {
    broken_ = why;
    state_.store(kBroken, std::memory_order_release);
  }
  const HostFlags::Flag& flag() const { return flag_; }

 private:
  enum { kUnarmed, kArmed, kBroken };
  void onFinish(const Status&) override { HostFlags::open(flag_); }
  int device_;
  HostFlags::Flag flag_;
  EventHandle inputsCopied_;
  std::atomic<int> state_{kUnarmed};
  Status broken_;
};

// Whether this group may return before its device work is done (staging.h says when).
bool streamOrdered(std::span<const StagedCall> calls, bool withHostOperations) {
  if (withHostOperations || !settingFlag(Setting::DeviceAsync)) return false;
  return std::all_of(calls.begin(), calls.end(), [&](const StagedCall& c) {
    return c.stream != nullptr && c.stream != cudaStreamLegacy && !c.peerInThisProcess && c.comm == calls[0].comm;
  });
}

StreamStaging& streamStateOf(const StagedCall& call) { return static_cast<CudaCommDevice*>(call.comm)->streams(); }

}  // namespace

// One stream-ordered operation until its stream passed the copy back: then its pinned memory and
// its gate word may be reused.
struct InFlight {
  std::unique_ptr<Staging> staging;
  std::shared_ptr<StreamGate> gate;
  EventHandle outputsCopied;
};

namespace {

// Enqueues the stream work of a unit of operations that the progress thread runs as one (a
// collective; a communicator's sends and receives of the group), on their streams: every copy in and
// the event the progress thread waits for, then every gate, then the copies out and the events that
// say the pinned memory is free again. A gate holds its stream until the unit ended, so a second
// operation's input behind the first's gate would never arrive.
Status enqueueStreamWork(std::span<InFlight* const> unit) {
  for (InFlight* f : unit) {
    const Staging& s = *f->staging;
    DeviceScope scope(s.device());
    LOOM_CUDA_TRY(scope.error());
    LOOM_TRY(s.enqueueCopyIn());
    LOOM_TRY(f->gate->inputsCopied().record(s.stream()));
  }
  for (InFlight* f : unit) {
    DeviceScope scope(f->staging->device());
    LOOM_CUDA_TRY(cuda::enqueueHostFlagWait(f->gate->flag().device, f->staging->stream()));
  }
  for (InFlight* f : unit) {
    DeviceScope scope(f->staging->device());
    LOOM_TRY(f->staging->enqueueCopyOut());
    LOOM_TRY(f->outputsCopied.record(f->staging->stream()));
  }
  return Status::Ok();
}

// The units of a stream-ordered group, in the order the progress thread runs them: each collective in
// call order, then all sends and receives together.
std::vector<std::vector<InFlight*>> unitsOf(std::span<const StagedCall> calls, std::vector<std::unique_ptr<InFlight>>& flights) {
  std::vector<std::vector<InFlight*>> units;
  std::vector<InFlight*> pointToPoint;
  for (size_t i = 0; i < flights.size(); ++i) {
    if (calls[i].pointToPoint)
      pointToPoint.push_back(flights[i].get());
    else
      units.push_back({flights[i].get()});
  }
  if (!pointToPoint.empty()) units.push_back(std::move(pointToPoint));
  return units;
}

// Queues the operations (planned over pinned memory, gated) first and only then enqueues their stream
// work, so that a call refused while planning or queuing leaves the device buffers untouched.
Status runStreamOrdered(std::span<StagedCall> calls, Stagings& stagings, const HostPart& hostPart) {
  std::vector<std::unique_ptr<InFlight>> flights;
  Status st;
  for (size_t i = 0; i < calls.size() && st.ok(); ++i) {
    DeviceScope scope(stagings[i]->device());
    StreamStaging& state = streamStateOf(calls[i]);
    HostFlags::Flag flag;
    st = cudaStatus(scope.error(), "cudaSetDevice");
    if (st.ok()) st = state.flags().acquire(&flag);
    if (!st.ok()) break;
    auto f = std::make_unique<InFlight>();
    f->staging = std::move(stagings[i]);
    f->gate = std::make_shared<StreamGate>(f->staging->device(), flag);
    calls[i].gate = f->gate;
    flights.push_back(std::move(f));
  }
  if (st.ok()) st = hostPart(calls, false);
  // A unit is queued as one operation: all of its gates are claimed, or none.
  StreamStaging& state = streamStateOf(calls[0]);
  for (const std::vector<InFlight*>& unit : unitsOf(calls, flights)) {
    if (!unit.front()->gate->claimed()) {  // not queued: nothing runs, nothing was enqueued
      for (InFlight* f : unit) state.flags().release(f->gate->flag());
      continue;
    }
    Status enqueued = enqueueStreamWork(unit);
    for (InFlight* f : unit) {
      if (enqueued.ok()) {
        f->gate->arm();
      } else {
        // The progress thread fails the communicator with this when it gets to the operation; anything
        // already enqueued passes the gate once it is finished.
        f->gate->breakWith(enqueued);
      }
    }
    if (st.ok()) st = enqueued;
  }
  for (size_t i = 0; i < flights.size(); ++i)
    if (flights[i]->gate->claimed()) state.add(std::move(flights[i]));
  return st;
}

}  // namespace

StreamStaging::StreamStaging() = default;

StreamStaging::~StreamStaging() {
  // The progress thread is gone, so every gate is open and the streams get past them.
  for (auto& f : inFlight_) {
    DeviceScope scope(f->staging->device());
    f->outputsCopied.wait();
  }
}

void StreamStaging::add(std::unique_ptr<InFlight> f) { inFlight_.push_back(std::move(f)); }

void StreamStaging::retire() {
  for (auto it = inFlight_.begin(); it != inFlight_.end();) {
    InFlight& f = **it;
    bool done = false;
    DeviceScope scope(f.staging->device());
    if (f.gate->finished() && f.outputsCopied.query(&done).ok() && done) {
      flags_.release(f.gate->flag());
      it = inFlight_.erase(it);
    } else {
      ++it;
    }
  }
}

Status runStaged(std::span<StagedCall> calls, bool withHostOperations, const HostPart& hostPart) {
  // What the streams are done with goes back first, so that the pinned blocks below come from the pool
  // rather than a fresh cudaHostAlloc (which may synchronize the device, waiting for a held stream).
  for (const StagedCall& call : calls) streamStateOf(call).retire();
  Stagings stagings;
  for (StagedCall& call : calls) {
    stagings.push_back(std::make_unique<Staging>());
    LOOM_TRY(stagings.back()->prepare(&call));
  }
  if (streamOrdered(calls, withHostOperations)) return runStreamOrdered(calls, stagings, hostPart);
  return runSynchronous(calls, stagings, hostPart);
}

Status readScalarInStreamOrder(const void** scalar, loomDataType_t dtype, void* storage, loomStream_t stream) {
  const MemoryInfo info = queryMemory(*scalar);
  if (info.kind != MemoryKind::Device) return Status::Ok();
  DeviceScope scope(info.device);
  LOOM_CUDA_TRY(scope.error());
  StreamCapture capture;
  LOOM_TRY(captureOf(stream, &capture));
  if (capture.active)
    return errorStatus(loomInvalidUsage,
                       "a PreMulSum scalar in device memory (loomScalarDevice) is read when the operation is called, "
                       "which cannot happen during CUDA graph capture; use loomScalarHostImmediate there");
  LOOM_CUDA_TRY(cudaMemcpyAsync(storage, *scalar, dataTypeSize(dtype), cudaMemcpyDeviceToHost, stream));
  LOOM_CUDA_TRY(cudaStreamSynchronize(stream));
  *scalar = storage;
  return Status::Ok();
}

}  // namespace loom::device
