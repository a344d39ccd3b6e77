// Staging of device buffers through pinned host memory (device_staging.h). Compiled only with the
// CUDA feature; listed in src/kernels/cuda/meson.build so that src/core/meson.build stays as it is.
#include "core/device_staging.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <mutex>
#include <utility>

#include "base/datatype.h"
#include "base/env.h"
#include "core/communicator.h"
#include "core/stream_capture.h"
#include "kernels/cuda/event_handle.h"
#include "kernels/cuda/memory_kind.h"
#include "kernels/cuda/host_flags.h"
#include "kernels/cuda/pinned_pool.h"
#include "kernels/cuda/stream_gate.h"

namespace loom {
namespace {

using cuda::MemoryInfo;
using cuda::MemoryKind;

// One pinned copy of a device range: the union of an operation's send and receive ranges when they
// overlap (in-place layouts keep their pointer relations), else one range each.
struct Region {
  const char* device = nullptr;
  size_t bytes = 0;
  int deviceId = -1;
  cuda::PinnedBlock pinned;

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
    cuda::DeviceScope scope(c.deviceId);
    LOOM_CUDA_TRY(scope.error());
    LOOM_CUDA_TRY(cudaMemcpyAsync(c.to, c.from, c.bytes, c.kind, c.stream));
  }
  return Status::Ok();
}

// The staging of one operation.
class Staging {
 public:
  // Rewrites op's device pointers to pinned copies and notes the copies in and out; enqueues
  // nothing. Managed memory is used in place (ordered by the operation's stream).
  Status prepare(Operation* op) {
    size_t sendBytes = 0, recvBytes = 0;
    bufferBytes(*op, &sendBytes, &recvBytes);
    const MemoryInfo send = sendBytes ? cuda::queryMemory(op->send) : MemoryInfo{};
    const MemoryInfo recv = recvBytes ? cuda::queryMemory(op->recv) : MemoryInfo{};
    for (const MemoryInfo* m : {&send, &recv})
      if (m->kind != MemoryKind::Host && device_ < 0) device_ = m->device;
    stream_ = op->stream;
    const bool sendDev = send.kind == MemoryKind::Device, recvDev = recv.kind == MemoryKind::Device;
    if (!sendDev && !recvDev) return Status::Ok();

    const char* s = static_cast<const char*>(op->send);
    char* r = static_cast<char*>(op->recv);
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
      ins_.push_back(Copy{sendRegion->map(s), s, sendBytes, sendRegion->deviceId, op->stream, cudaMemcpyDeviceToHost});
    if (recvRegion)
      outs_.push_back(Copy{r, recvRegion->map(r), recvBytes, recvRegion->deviceId, op->stream, cudaMemcpyHostToDevice});
    // Pointers the call names but does not use on this rank (a non-root's in-place recvbuff) follow
    // along when they fall inside a staged range, so in-place relations hold on every rank.
    if (const char* p = remap(op->send, sendRegion, recvRegion)) op->send = p;
    if (char* p = remap(op->recv, recvRegion, sendRegion)) op->recv = p;
    return Status::Ok();
  }

  // Whether the operation names CUDA memory (device or managed): then its stream orders it.
  bool touchesCuda() const { return device_ >= 0; }
  int device() const { return device_; }
  loomStream_t stream() const { return stream_; }

  Status enqueueCopyIn() const { return enqueueCopies(ins_); }
  Status enqueueCopyOut() const { return enqueueCopies(outs_); }
  Status synchronize() const {
    cuda::DeviceScope scope(device_);
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

// Nonblocking communicators queue their plans on a progress thread: the pinned buffers must outlive
// that work, so wait for it.
Status waitForQueuedWork(const std::vector<Operation>& ops) {
  std::vector<loomComm_t> seen;
  Status first;
  for (const Operation& op : ops) {
    loomComm_t comm = op.comm;
    if (!comm->engine || std::find(seen.begin(), seen.end(), comm) != seen.end()) continue;
    seen.push_back(comm);
    Status st = comm->engine->wait(comm->opCount, -1);
    if (first.ok() && !st.ok()) first = st;
  }
  return first;
}

// Enqueues `copies` of every operation that touches CUDA, then waits for all their streams.
Status copyAndWait(const Stagings& stagings, Status (Staging::*copies)() const, const char* what) {
  for (const auto& s : stagings)
    if (s->touchesCuda()) LOOM_TRY(((*s).*copies)().withContext(what));
  for (const auto& s : stagings)
    if (s->touchesCuda()) LOOM_TRY(s->synchronize().withContext(what));
  return Status::Ok();
}

Status runSynchronous(const std::vector<Operation>& staged, const Stagings& stagings, HostRunner runHost) {
  LOOM_TRY(copyAndWait(stagings, &Staging::enqueueCopyIn, "staging device buffers"));
  Status st = runHost(staged);
  Status waited = waitForQueuedWork(staged);
  if (!st.ok()) return st;
  LOOM_TRY(waited);
  return copyAndWait(stagings, &Staging::enqueueCopyOut, "copying results to device buffers");
}

// ---- Stream-ordered staging ----

using cuda::EventHandle;

// The progress thread's view of one operation's stream: ready once the stream copied the input to
// pinned memory (the event is recorded only after the operation was queued, so ready() first waits
// for arm()); finishing it opens the stream's gate whatever the outcome (after a failure the output is
// undefined, as in NCCL, and the communicator reports the error).
class StreamGate final : public OperationGate {
 public:
  StreamGate(int device, cuda::HostFlags::Flag flag) : device_(device), flag_(flag) {}
  Status ready(bool* isReady) override {
    *isReady = false;
    const int state = state_.load(std::memory_order_acquire);
    if (state == kBroken) return broken_;
    if (state != kArmed) return Status::Ok();
    cuda::DeviceScope scope(device_);
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
  const cuda::HostFlags::Flag& flag() const { return flag_; }

 private:
  enum { kUnarmed, kArmed, kBroken };
  void onFinish(const Status&) override { cuda::HostFlags::open(flag_); }
  int device_;
  cuda::HostFlags::Flag flag_;
  EventHandle inputsCopied_;
  std::atomic<int> state_{kUnarmed};
  Status broken_;
};

// One stream-ordered operation until its stream passed the copy back: then its pinned memory and
// its gate word may be reused.
struct InFlight {
  std::unique_ptr<Staging> staging;
  std::shared_ptr<StreamGate> gate;
  EventHandle outputsCopied;
};

class StreamStaging final : public DeviceStreamState {
 public:
  ~StreamStaging() override {
    // The progress thread is gone, so every gate is open and the streams get past them.
    for (auto& f : inFlight_) {
      cuda::DeviceScope scope(f->staging->device());
      f->outputsCopied.wait();
    }
  }
  cuda::HostFlags& flags() { return flags_; }
  void add(std::unique_ptr<InFlight> f) { inFlight_.push_back(std::move(f)); }
  // Frees what the streams are done with, oldest first.
  void retire() {
    for (auto it = inFlight_.begin(); it != inFlight_.end();) {
      InFlight& f = **it;
      bool done = false;
      cuda::DeviceScope scope(f.staging->device());
      if (f.gate->finished() && f.outputsCopied.query(&done).ok() && done) {
        flags_.release(f.gate->flag());
        it = inFlight_.erase(it);
      } else {
        ++it;
      }
    }
  }

 private:
  cuda::HostFlags flags_;
  std::deque<std::unique_ptr<InFlight>> inFlight_;
};

// Whether this call may return before its device work is done (see device_staging.h): every
// operation names CUDA memory on a created stream, and no communicator has a rank in this process.
bool streamOrdered(const std::vector<Operation>& ops, const Stagings& stagings) {
  if (envInt("LOOM_DEVICE_ASYNC", 1) == 0) return false;
  for (size_t i = 0; i < ops.size(); ++i) {
    const loomStream_t stream = ops[i].stream;
    if (!stagings[i]->touchesCuda() || stream == nullptr || stream == cudaStreamLegacy) return false;
    if (ops[i].comm->transports && ops[i].comm->transports->hasPeerInThisProcess()) return false;
  }
  return true;
}

StreamStaging& streamStateOf(loomComm_t comm) {
  if (!comm->deviceStreams) comm->deviceStreams = std::make_unique<StreamStaging>();
  return static_cast<StreamStaging&>(*comm->deviceStreams);
}

// Enqueues on the operation's stream: the copies in, the event the progress thread waits for, the
// gate, the copies out and the event that says the pinned memory is free again.
Status enqueueStreamWork(InFlight& f) {
  const Staging& s = *f.staging;
  cuda::DeviceScope scope(s.device());
  LOOM_CUDA_TRY(scope.error());
  LOOM_TRY(s.enqueueCopyIn());
  LOOM_TRY(f.gate->inputsCopied().record(s.stream()));
  LOOM_CUDA_TRY(cuda::enqueueHostFlagWait(f.gate->flag().device, s.stream()));
  LOOM_TRY(s.enqueueCopyOut());
  return f.outputsCopied.record(s.stream());
}

// Queues the operations (planned over pinned memory, gated) first and only then enqueues their stream
// work, so that a call refused while planning or queuing leaves the device buffers untouched.
Status runStreamOrdered(std::vector<Operation>& staged, Stagings& stagings, HostRunner runHost) {
  std::vector<std::unique_ptr<InFlight>> flights;
  Status st;
  for (size_t i = 0; i < staged.size() && st.ok(); ++i) {
    cuda::DeviceScope scope(stagings[i]->device());
    cuda::HostFlags::Flag flag;
    {
      std::lock_guard<std::mutex> lock(staged[i].comm->busy);
      StreamStaging& state = streamStateOf(staged[i].comm);
      state.retire();
      st = cuda::cudaStatus(scope.error(), "cudaSetDevice");
      if (st.ok()) st = state.flags().acquire(&flag);
    }
    if (!st.ok()) break;
    auto f = std::make_unique<InFlight>();
    f->staging = std::move(stagings[i]);
    f->gate = std::make_shared<StreamGate>(f->staging->device(), flag);
    staged[i].gate = f->gate;
    flights.push_back(std::move(f));
  }
  if (st.ok()) st = runHost(staged);
  for (size_t i = 0; i < flights.size(); ++i) {
    InFlight& f = *flights[i];
    loomComm_t comm = staged[i].comm;
    std::lock_guard<std::mutex> lock(comm->busy);
    StreamStaging& state = streamStateOf(comm);
    if (!f.gate->claimed()) {  // not queued: nothing runs, nothing was enqueued
      state.flags().release(f.gate->flag());
      continue;
    }
    Status enqueued = enqueueStreamWork(f).withContext(operationName(staged[i]));
    if (enqueued.ok()) {
      f.gate->arm();
    } else {
      // The progress thread fails the communicator with this when it gets to the operation; anything
      // already enqueued passes the gate once it is finished.
      f.gate->breakWith(enqueued);
      if (st.ok()) st = enqueued;
    }
    state.add(std::move(flights[i]));
  }
  return st;
}

}  // namespace

Status runWithDeviceStaging(const std::vector<Operation>& ops, HostRunner runHost) {
  if (!cuda::cudaUsable()) return runHost(ops);
  std::vector<Operation> staged = ops;
  Stagings stagings;
  bool anyCuda = false;
  for (Operation& op : staged) {
    stagings.push_back(std::make_unique<Staging>());
    LOOM_TRY(stagings.back()->prepare(&op).withContext(operationName(op)));
    anyCuda = anyCuda || stagings.back()->touchesCuda();
  }
  if (!anyCuda) return runHost(ops);
  if (streamOrdered(ops, stagings)) return runStreamOrdered(staged, stagings, runHost);
  return runSynchronous(staged, stagings, runHost);
}

Status readScalarToHost(const void** scalar, loomDataType_t dtype, void* storage, loomStream_t stream) {
  const MemoryInfo info = cuda::queryMemory(*scalar);
  if (info.kind != MemoryKind::Device) return Status::Ok();
  cuda::DeviceScope scope(info.device);
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

bool deviceMemoryUsable() { return cuda::cudaUsable(); }

Status checkDeviceList(int ndev, const int* devlist) {
  if (!cuda::cudaUsable())
    return invalidArgument("loomCommInitAll: device lists need a GPU ({}); pass NULL for host ranks",
                           cuda::unusableReason());
  const int visible = cuda::deviceCount();
  for (int i = 0; i < ndev; ++i)
    if (devlist[i] < 0 || devlist[i] >= visible)
      return invalidArgument("loomCommInitAll: devlist[{}] = {} is not one of the {} visible CUDA device(s)", i,
                             devlist[i], visible);
  return Status::Ok();
}

}  // namespace loom
