// Device buffers run by the plan kernel (device_plans.h). Compiled only with the CUDA feature;
// listed in src/kernels/cuda/meson.build with the other CUDA-only parts of core.
#include "core/device_plans.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <tuple>

#include "algorithms/device_channels.h"
#include "base/datatype.h"
#include "base/env.h"
#include "base/log.h"
#include "core/communicator.h"
#include "core/device_plan.h"
#include "core/planner.h"
#include "core/stream_capture.h"
#include "kernels/cuda/cuda_reduce.h"
#include "kernels/cuda/event_handle.h"
#include "kernels/cuda/host_flags.h"
#include "kernels/cuda/memory_kind.h"
#include "kernels/cuda/pinned_pool.h"
#include "kernels/cuda/plan_launch.h"
#include "transport/p2p_fifos.h"

namespace loom {
namespace {

using cuda::DeviceLaneStatus;
using cuda::MemoryKind;

// One launch until its stream passed it: the encoded plans and the lanes' statuses live in one
// pinned block (the kernel writes the statuses there), kept until then.
struct Launch {
  struct Entry {
    BoundPlan bound;  // the plan, and what the operation was (described only for a failure)
    size_t firstStatus = 0;
  };
  cuda::PinnedBlock blob;
  DeviceLaneStatus* statuses = nullptr;
  std::vector<Entry> entries;
  cuda::EventHandle done;
};

class DevicePlans final : public DevicePlanState {
 public:
  enum class Setup { NotYet, Ready, Unavailable };

  ~DevicePlans() override {
    if (failed_.load()) raiseAbort();
    if (fifos) {  // launches run on the transport's GPU
      cuda::DeviceScope scope(fifos->device());
      for (auto& launch : launches) launch->done.wait();
    }
    if (fifos && failed_.load()) fifos->keepBlockAfterFailure();
    if (abortFlag.host) flags.release(abortFlag);
  }
  void raiseAbort() override {
    failed_.store(true);
    if (volatile uint32_t* word = abortWord_.load()) *word = 1;
  }
  void setAbortFlag(const cuda::HostFlags::Flag& flag) {
    abortFlag = flag;
    abortWord_.store(flag.host);
    if (failed_.load()) *flag.host = 1;  // failed before the word existed
  }

  // Set up and read under the communicator's `busy` lock.
  Setup setup = Setup::NotYet;
  std::unique_ptr<P2pFifos> fifos;
  // maxLanesPerChannel by (collective, algorithm, root): the same for every operation of that shape.
  std::map<std::tuple<int, int, int>, uint64_t> lanesPerChannel;
  cuda::HostFlags flags;
  cuda::HostFlags::Flag abortFlag;
  cuda::EventHandle lastLaunch;  // launches share the FIFOs: each follows the one before
  // The same within one CUDA graph capture: the last launch captured, and into which capture.
  cuda::EventHandle lastCaptured;
  unsigned long long lastCaptureId = 0;

  std::mutex mutex;  // guards `launches` and `captured`: loomCommGetAsyncError looks at them from any thread
  std::deque<std::unique_ptr<Launch>> launches;
  // Launches captured into CUDA graphs: their encoded plans are copied to the GPU at every replay and
  // their lanes report into the same statuses, so they are kept for the communicator's lifetime (the
  // graphs must not be replayed after it; see device_plans.h).
  std::vector<std::unique_ptr<Launch>> captured;

 private:
  std::atomic<bool> failed_{false};
  std::atomic<volatile uint32_t*> abortWord_{nullptr};
};

DevicePlans& stateOf(loomComm* comm) { return static_cast<DevicePlans&>(*comm->devicePlans); }

void failComm(loomComm* comm, const Status& error) {
  markCommFailed(comm, error, false);
  std::lock_guard<std::mutex> lock(comm->errorMutex);
  comm->lastError = error.message();
}

// Reports and forgets finished launches, oldest first.
void reapLocked(loomComm* comm, DevicePlans& st) {
  if (st.launches.empty()) return;
  cuda::DeviceScope scope(st.fifos->device());  // launches run on the transport's GPU
  while (!st.launches.empty()) {
    Launch& l = *st.launches.front();
    bool done = false;
    Status query = l.done.query(&done);
    if (!query.ok()) {
      failComm(comm, query.withContext("watching a device launch"));
      return;  // the stream is broken: its launches stay until the communicator goes
    }
    if (!done) return;
    for (const Launch::Entry& e : l.entries) {
      const Plan& plan = *e.bound.plan;
      Status result = cuda::devicePlanResult(plan, std::span(l.statuses + e.firstStatus, plan.lanes.size()));
      if (!result.ok()) {
        failComm(comm, result.withContext(describePlan(e.bound)));
        break;
      }
    }
    st.launches.pop_front();
  }
}

// A failure some replay of a captured launch reported (lanes that have not reported yet, or report
// done, are no failure: a replay may be running).
void reapCapturedLocked(loomComm* comm, DevicePlans& st) {
  if (!checkCommUsable(comm).ok()) return;  // already failed (and told): a failure stays in the statuses
  for (const auto& l : st.captured)
    for (const Launch::Entry& e : l->entries) {
      const Plan& plan = *e.bound.plan;
      const std::span<const DeviceLaneStatus> lanes(l->statuses + e.firstStatus, plan.lanes.size());
      const bool failed = std::any_of(lanes.begin(), lanes.end(), [](const DeviceLaneStatus& s) {
        const auto outcome = static_cast<cuda::DeviceLaneOutcome>(
            std::atomic_ref<uint32_t>(const_cast<uint32_t&>(s.outcome)).load(std::memory_order_acquire));
        return outcome != cuda::DeviceLaneOutcome::NotReported && outcome != cuda::DeviceLaneOutcome::Done;
      });
      if (!failed) continue;
      failComm(comm, cuda::devicePlanResult(plan, lanes).withContext(describePlan(e.bound) + ", in a CUDA graph"));
      return;
    }
}

// The GPU that every buffer the operation uses on this rank is on, or -1 when one of them is not
// device memory (host, managed) or they are on different GPUs.
int deviceOfBuffers(const Operation& op) {
  size_t sendBytes = 0, recvBytes = 0;
  bufferBytes(op, &sendBytes, &recvBytes);
  int device = -1;
  for (auto [p, bytes] : {std::pair<const void*, size_t>{op.send, sendBytes}, {op.recv, recvBytes}}) {
    if (bytes == 0) continue;
    const cuda::MemoryInfo info = cuda::queryMemory(p);
    if (info.kind != MemoryKind::Device || (device >= 0 && info.device != device)) return -1;
    device = info.device;
  }
  return device;
}

bool runsOnDevice(const Operation& op) { return op.count > 0; }

// LOOM_DEVICE_NCHANNELS: the p2p transport's channels, the most a plan kernel splits an operation over
// (algorithms/device_channels.h picks per operation). Every rank must use the same value.
uint32_t deviceChannelSetting() {
  constexpr int64_t kDefault = 32, kMost = 64;
  const int64_t v = envInt("LOOM_DEVICE_NCHANNELS", kDefault);
  if (v >= 1 && v <= kMost) return static_cast<uint32_t>(v);
  LOOM_WARN(Init, "LOOM_DEVICE_NCHANNELS={} is outside 1..{}; using {}", v, kMost, kDefault);
  return kDefault;
}

// The request's channel count for a plan kernel: deviceChannels over this communicator's limits, or
// LOOM_NCHANNELS when set (within them). Every rank decides alike: same shape, same agreed limits.
Status adjustDeviceChannels(loomComm* comm, Algorithm algo, PlanRequest* req) {
  DevicePlans& st = stateOf(comm);
  const auto key = std::make_tuple(static_cast<int>(req->coll), static_cast<int>(algo), req->root);
  auto found = st.lanesPerChannel.find(key);
  if (found == st.lanesPerChannel.end()) {
    uint64_t lanes = 0;
    LOOM_TRY(maxLanesPerChannel(algo, *req, &lanes));
    found = st.lanesPerChannel.emplace(key, lanes).first;
  }
  DeviceChannelLimits limits{static_cast<int>(st.fifos->nchannels()), st.fifos->laneBudget()};
  if (comm->settings.forcedChannels > 0) limits.maxChannels = std::min(limits.maxChannels, comm->settings.forcedChannels);
  const uint64_t bytes = comm->settings.forcedChannels > 0 ? UINT64_MAX : deviceOperationBytes(*req);
  req->nchannels = deviceChannels(bytes, found->second, limits);
  return Status::Ok();
}

Status setUp(loomComm* comm, int device) {
  DevicePlans& st = stateOf(comm);
  P2pFifoOptions options;
  options.nchannels = deviceChannelSetting();
  options.nslots = static_cast<uint32_t>(comm->settings.nslots);
  options.slotBytes = comm->transports->slotBytes();
  options.policy = p2pPolicyFromEnvironment();
  std::vector<PeerLocation> peers;
  for (const RankInfo& info : comm->bootstrap->table()) peers.push_back(PeerLocation{info.hostHash, info.pid, info.hostname});
  // Host allocations first: a rank that finished the exchange may launch at once, and a pinned
  // allocation here could then wait behind that kernel (ranks that are threads share the device).
  // The pinned pool keeps a block for the first launches' plans for the same reason.
  cuda::HostFlags::Flag flag;
  {
    cuda::DeviceScope scope(device);
    LOOM_CUDA_TRY(scope.error());
    LOOM_TRY(st.flags.acquire(&flag));
    cuda::PinnedBlock warm;
    LOOM_TRY(warm.acquire(size_t{1} << 20));
  }
  st.setAbortFlag(flag);
  std::string why;
  LOOM_TRY(P2pFifos::create(*comm->bootstrap, peers, device, options, &st.fifos, &why)
               .withContext(comm->describe() + ": device plans"));
  if (!st.fifos) {
    st.setup = DevicePlans::Setup::Unavailable;
    LOOM_INFO(Init, "{}: device buffers are staged through host memory: {}", comm->describe(), why);
    return Status::Ok();
  }
  st.setup = DevicePlans::Setup::Ready;
  LOOM_INFO(Init, "{}: device buffers run as plan kernels on GPU {}", comm->describe(), device);
  return Status::Ok();
}

// Sets up every communicator that needs it at once: one thread may drive several ranks of one
// communicator (a group over loomCommInitAll's communicators), and each setup waits for all ranks.
Status setUpAll(const std::vector<std::pair<loomComm*, int>>& pending) {
  if (pending.size() == 1) return setUp(pending[0].first, pending[0].second);
  std::vector<Status> results(pending.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < pending.size(); ++i)
    threads.emplace_back([&, i] { results[i] = setUp(pending[i].first, pending[i].second); });
  for (std::thread& t : threads) t.join();
  for (const Status& st : results) LOOM_TRY(st);
  return Status::Ok();
}

// Device memory a launch needs besides the user's buffers, allocated on its stream and freed there
// after the launch (or at once when the launch is given up before anything else was enqueued).
class StreamTemporaries {
 public:
  explicit StreamTemporaries(cudaStream_t stream) : stream_(stream) {}
  ~StreamTemporaries() {
    for (void* p : blocks_) cudaFreeAsync(p, stream_);
  }
  Status allocate(size_t bytes, char** out) {
    *out = nullptr;
    if (bytes == 0) return Status::Ok();
    void* p = nullptr;
    LOOM_CUDA_TRY(cudaMallocAsync(&p, bytes, stream_));
    blocks_.push_back(p);
    *out = static_cast<char*>(p);
    return Status::Ok();
  }

 private:
  cudaStream_t stream_;
  std::vector<void*> blocks_;
};

// Which of a plan's buffers the senders may write into directly (single copy, the p2p transport's
// direct mode): none with LOOM_P2P_DIRECT=0; all when every peer that could (a rank of this process)
// is on this GPU; else those that peer access opens to other GPUs (the user's cudaMalloc'd buffers,
// not the stream-ordered temporaries). Receivers decide alone: a sender writes only where one posted.
std::vector<uint8_t> directBuffersOf(const P2pFifos& fifos, const std::vector<char*>& buffers) {
  std::vector<uint8_t> direct;
  if (envString("LOOM_P2P_DIRECT", "1") == "0") return direct;
  direct.assign(buffers.size(), 1);
  if (!fifos.directPeersOnOtherGpus()) return direct;
  for (size_t i = 0; i < buffers.size(); ++i) direct[i] = buffers[i] && cuda::coveredByPeerAccess(buffers[i]) ? 1 : 0;
  return direct;
}

// The transport's FIFO table ([peer * nchannels + channel]) cut down to the first `used` channels, so
// that a small operation's encoding (copied to the GPU at every launch) does not carry 32 channels.
std::vector<cuda::DeviceFifo> fifoTable(std::span<const cuda::DeviceFifo> all, uint32_t nchannels, uint32_t used) {
  std::vector<cuda::DeviceFifo> table;
  const size_t nranks = all.size() / nchannels;
  table.reserve(nranks * used);
  for (size_t peer = 0; peer < nranks; ++peer)
    for (uint32_t c = 0; c < used; ++c) table.push_back(all[peer * nchannels + c]);
  return table;
}

// Encodes plans [first, end) (one dtype) as one sequence and launches it on `stream`; `captured`: the
// stream is being captured into a CUDA graph.
Status launchRun(loomComm* comm, std::vector<BoundPlan>& plans, size_t first, size_t end, cudaStream_t stream,
                 bool captured) {
  DevicePlans& st = stateOf(comm);
  const P2pFifos& fifos = *st.fifos;
  const loomDataType_t dtype = plans[first].dtype;  // the plans move into the launch below
  auto launch = std::make_unique<Launch>();
  StreamTemporaries temps(stream);
  // The plan's input when it cannot be the user's: a copy (an input that overlaps the output in a way
  // the plan cannot take), or for PreMulSum a copy scaled by this rank's scalar (the plan is a sum).
  struct StagedSend {
    char* to;
    const char* from;
    size_t bytes;
    bool scales;  // PreMulSum: multiplied by `scale`'s scalar on the way
    ReduceOp scale;
  };
  std::vector<StagedSend> stagedSends;
  const size_t n = end - first;
  std::vector<std::vector<char*>> buffers(n);
  std::vector<std::vector<uint8_t>> direct(n);
  std::vector<std::vector<cuda::DeviceFifo>> sends(n), recvs(n);
  std::vector<cuda::DevicePlanBindings> bindings(n);
  std::vector<size_t> planBytes(n), firstStatus(n);
  size_t lanes = 0;
  uint32_t blocks = 0;
  for (size_t k = 0; k < n; ++k) {
    BoundPlan& bp = plans[first + k];
    buffers[k] = bp.buffers;
    if (bp.plan->coll != Collective::SendRecv) {
      if (bp.stageFrom) {
        size_t sendBytes = 0, recvBytes = 0;
        bufferBytes(bp.call, &sendBytes, &recvBytes);
        LOOM_TRY(temps.allocate(sendBytes, &buffers[k][kSendBuffer]));
        stagedSends.push_back({buffers[k][kSendBuffer], bp.stageFrom, sendBytes, bp.stageScales, bp.stageOp});
      }
      LOOM_TRY(temps.allocate(bp.plan->scratchElems * bp.elemSize, &buffers[k][kScratchBuffer]));
    }
    direct[k] = directBuffersOf(fifos, buffers[k]);
    cuda::DevicePlanBindings& b = bindings[k];
    b.dtype = bp.dtype;
    b.op = bp.op;
    b.buffers = buffers[k];
    b.directBuffers = direct[k];
    b.nchannels = std::clamp<uint32_t>(bp.plan->nchannels, 1, fifos.nchannels());
    sends[k] = fifoTable(fifos.sends(), fifos.nchannels(), b.nchannels);
    recvs[k] = fifoTable(fifos.recvs(), fifos.nchannels(), b.nchannels);
    b.sends = sends[k];
    b.recvs = recvs[k];
    b.abort = const_cast<uint32_t*>(st.abortFlag.device);
    b.timeoutNs = static_cast<uint64_t>(std::max<int64_t>(comm->settings.timeoutMs, 0)) * 1000000u;
    planBytes[k] = cuda::devicePlanBytes(*bp.plan, b);
    firstStatus[k] = lanes;
    lanes += bp.plan->lanes.size();
    blocks = std::max(blocks, static_cast<uint32_t>(bp.plan->lanes.size()));
  }
  if (blocks == 0) return Status::Ok();
  const cuda::DevicePlanSequenceLayout layout = cuda::layoutDevicePlanSequence(planBytes);
  const size_t statusBytes = lanes * sizeof(DeviceLaneStatus);
  LOOM_TRY(launch->blob.acquire(layout.total + statusBytes));
  std::byte* blob = reinterpret_cast<std::byte*>(launch->blob.data());
  std::memset(blob, 0, layout.total + statusBytes);
  launch->statuses = reinterpret_cast<DeviceLaneStatus*>(blob + layout.total);
  cuda::writeDevicePlanSequenceHeader(layout, blocks, std::span(blob, layout.total));
  for (size_t k = 0; k < n; ++k) {
    BoundPlan& bp = plans[first + k];
    bindings[k].laneStatus = launch->statuses + firstStatus[k];
    cuda::DevicePlanShape shape;
    Status encoded =
        cuda::encodeDevicePlan(*bp.plan, bindings[k], std::span(blob + layout.offsets[k], planBytes[k]), &shape);
    if (!encoded.ok()) return encoded.withContext(describePlan(bp));
    launch->entries.push_back({std::move(bp), firstStatus[k]});  // bindings[k] holds its own buffer table
  }
  char* onDevice = nullptr;
  LOOM_TRY(temps.allocate(layout.total, &onDevice));

  // Nothing is enqueued before this point but allocations: a refusal above leaves the user's memory as it was.
  for (const StagedSend& s : stagedSends) {
    if (s.scales)
      LOOM_CUDA_TRY(cuda::copyArrayAsync(s.to, s.from, s.bytes / dataTypeSize(dtype), dtype, s.scale, true, stream));
    else
      LOOM_CUDA_TRY(cudaMemcpyAsync(s.to, s.from, s.bytes, cudaMemcpyDeviceToDevice, stream));
  }
  LOOM_CUDA_TRY(cudaMemcpyAsync(onDevice, blob, layout.total, cudaMemcpyHostToDevice, stream));
  LOOM_TRY(cuda::cudaStatus(cuda::launchDevicePlanSequence(onDevice, blocks, dtype, stream),
                            "launching the plan kernel"));
  if (!captured) LOOM_TRY(launch->done.record(stream));
  std::lock_guard<std::mutex> lock(st.mutex);
  if (captured)
    st.captured.push_back(std::move(launch));
  else
    st.launches.push_back(std::move(launch));
  return Status::Ok();
}

// One communicator's share of a group on the device: collectives in call order, then one plan for all
// its point-to-point operations (as the host path orders them), launched in runs of one dtype.
// `devices[i]`: the GPU of ops[i]'s buffers (deviceOfBuffers, asked once per call).
Status launchForComm(loomComm* comm, const std::vector<const Operation*>& ops, const std::vector<int>& devices) {
  DevicePlans& st = stateOf(comm);
  // A capture in global mode, here or in another thread, would refuse the event queries and
  // allocations below (and be invalidated by them): none of them touches a capturing stream.
  RelaxedCaptureMode relaxed;
  {
    std::lock_guard<std::mutex> lock(st.mutex);
    reapLocked(comm, st);
    reapCapturedLocked(comm, st);
  }
  LOOM_TRY(checkCommUsable(comm));
  const int device = st.fifos->device();
  std::vector<BoundPlan> plans;
  std::vector<Operation> p2p;
  for (size_t i = 0; i < ops.size(); ++i) {
    const Operation* op = ops[i];
    if (devices[i] != device)
      return errorStatus(loomInvalidUsage,
                         "{} on {}: its buffers are on another GPU than the one this communicator runs on ({})",
                         operationName(*op), comm->describe(), device);
    if (op->coll == Collective::SendRecv) {
      p2p.push_back(*op);
      continue;
    }
    BoundPlan bp;
    LOOM_TRY(planCollective(comm, *op, &bp, false,
                            [comm](Algorithm algo, PlanRequest* req) { return adjustDeviceChannels(comm, algo, req); }));
    plans.push_back(std::move(bp));
  }
  if (!p2p.empty()) {
    BoundPlan bp;
    LOOM_TRY(planPointToPoint(comm, p2p, &bp));
    if (!bp.plan->lanes.empty()) plans.push_back(std::move(bp));
  }
  if (plans.empty()) return Status::Ok();

  cuda::DeviceScope scope(device);
  LOOM_CUDA_TRY(scope.error());
  const cudaStream_t stream = ops.front()->stream;
  std::vector<cudaStream_t> others;
  for (const Operation* op : ops)
    if (op->stream != stream && std::find(others.begin(), others.end(), op->stream) == others.end())
      others.push_back(op->stream);
  // In a CUDA graph capture every stream of the group must be in the same one. A captured launch is
  // not ordered after the communicator's earlier launches (an event from outside the capture would
  // invalidate it): the application orders replays with the communicator's other work, as with NCCL.
  StreamCapture capture;
  LOOM_TRY(captureOf(stream, &capture));
  for (cudaStream_t other : others) {
    StreamCapture c;
    LOOM_TRY(captureOf(other, &c));
    if (c.active != capture.active || c.id != capture.id)
      return errorStatus(loomInvalidUsage,
                         "{}: the streams of one group must all be captured into the same CUDA graph, or none",
                         comm->describe());
  }
  // After this communicator's previous launch (in this capture, when capturing) and after everything
  // already on the group's streams.
  if (!capture.active) LOOM_TRY(st.lastLaunch.orderBefore(stream));
  if (capture.active && st.lastCaptureId == capture.id) LOOM_TRY(st.lastCaptured.orderBefore(stream));
  for (cudaStream_t other : others) {
    cuda::EventHandle joined;
    LOOM_TRY(joined.record(other));
    LOOM_TRY(joined.orderBefore(stream));
  }
  Status launched;
  for (size_t first = 0; first < plans.size() && launched.ok();) {
    size_t end = first;
    while (end < plans.size() && plans[end].dtype == plans[first].dtype) ++end;
    launched = launchRun(comm, plans, first, end, stream, capture.active);
    first = end;
  }
  // Whatever was enqueued, later work on these streams and later launches wait for it.
  cuda::EventHandle& after = capture.active ? st.lastCaptured : st.lastLaunch;
  Status ordered = after.record(stream);
  if (capture.active) st.lastCaptureId = capture.id;
  for (cudaStream_t other : others)
    if (ordered.ok()) ordered = after.orderBefore(other);
  if (launched.ok()) launched = ordered;
  if (!launched.ok()) failComm(comm, launched);  // the peers' lanes wait for this rank: stop ours, fail the call
  return launched;
}

}  // namespace

std::unique_ptr<DevicePlanState> makeDevicePlanState() { return std::make_unique<DevicePlans>(); }

Status runWithDevicePlans(const std::vector<Operation>& ops, HostRunner next) {
  if (!cuda::cudaUsable()) return next(ops);
  std::vector<int> device(ops.size(), -1);
  bool any = false;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!ops[i].comm->devicePlans || !runsOnDevice(ops[i])) continue;
    device[i] = deviceOfBuffers(ops[i]);
    any = any || device[i] >= 0;
  }
  if (!any) {
    LOOM_TRY(refuseCapturingStreams(ops));  // nothing for plan kernels: what is captured cannot run
    return next(ops);
  }
  // A communicator's point-to-point operations are one plan: all on the device, or none.
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i].coll == Collective::SendRecv && device[i] < 0)
      for (size_t j = 0; j < ops.size(); ++j)
        if (ops[j].comm == ops[i].comm && ops[j].coll == Collective::SendRecv) device[j] = -1;

  std::vector<loomComm*> comms;
  for (size_t i = 0; i < ops.size(); ++i)
    if (device[i] >= 0 && std::find(comms.begin(), comms.end(), ops[i].comm) == comms.end()) comms.push_back(ops[i].comm);
  std::vector<Operation> rest;
  {
    std::vector<std::unique_lock<std::mutex>> locks;
    for (loomComm* comm : comms) locks.emplace_back(comm->busy);
    std::vector<std::pair<loomComm*, int>> pending;
    for (loomComm* comm : comms) {
      LOOM_TRY(checkCommUsable(comm));
      if (stateOf(comm).setup != DevicePlans::Setup::NotYet) continue;
      size_t i = 0;
      while (ops[i].comm != comm || device[i] < 0) ++i;  // its first operation on the device
      // The setup exchanges with every rank and allocates: nothing a capture may hold.
      for (const Operation& op : ops) {
        StreamCapture capture;
        if (op.comm == comm) LOOM_TRY(captureOf(op.stream, &capture));
        if (capture.active)
          return errorStatus(loomInvalidUsage,
                             "{} on {}: the communicator sets up its GPU transport at its first operation on "
                             "device buffers, which cannot happen during CUDA graph capture: run one such "
                             "operation before capturing (nothing was enqueued)",
                             operationName(op), comm->describe());
      }
      pending.emplace_back(comm, device[i]);
    }
    if (!pending.empty()) LOOM_TRY(setUpAll(pending));
    for (size_t i = 0; i < ops.size(); ++i)
      if (device[i] < 0 || stateOf(ops[i].comm).setup != DevicePlans::Setup::Ready) rest.push_back(ops[i]);
    LOOM_TRY(refuseCapturingStreams(rest));  // before anything of the group is launched
    for (loomComm* comm : comms) {
      if (stateOf(comm).setup != DevicePlans::Setup::Ready) continue;
      std::vector<const Operation*> mine;
      std::vector<int> devices;
      for (size_t i = 0; i < ops.size(); ++i)
        if (ops[i].comm == comm && device[i] >= 0) {
          mine.push_back(&ops[i]);
          devices.push_back(device[i]);
        }
      LOOM_TRY(launchForComm(comm, mine, devices));
    }
  }
  return rest.empty() ? Status::Ok() : next(rest);
}

void pollDeviceLaunches(loomComm* comm) {
  if (!comm->devicePlans) return;
  DevicePlans& st = stateOf(comm);
  std::lock_guard<std::mutex> lock(st.mutex);
  if (st.launches.empty() && st.captured.empty()) return;  // no CUDA call for host-only communicators
  RelaxedCaptureMode relaxed;  // event queries while some thread captures a graph (launchForComm says why)
  reapLocked(comm, st);
  reapCapturedLocked(comm, st);
}

}  // namespace loom
