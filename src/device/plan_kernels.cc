// Plan kernels (plan_kernels.h): setup, channel counts, the order of launches and streams, and what
// became of finished launches. The encoding and the launch itself are kernel_launch.cc's.
#include "device/plan_kernels.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "base/settings.h"
#include "base/log.h"
#include "device/channels.h"
#include "device/comm_device.h"
#include "device/low_latency.h"
#include "device/memory_kind.h"
#include "device/plan_encoder.h"
#include "device/stream_capture.h"
#include "device/stream_pool.h"
#include "kernels/cuda/cuda_reduce.h"
#include "kernels/cuda/plan_launch.h"
#include "kernels/cuda/stream_gate.h"

namespace loom::device {
namespace {

// LOOM_DEVICE_NCHANNELS: the p2p transport's channels, the most a plan kernel splits an operation over
// (channels.h picks per operation). Every rank must use the same value.
uint32_t deviceChannelSetting() {
  return static_cast<uint32_t>(settingInt(Setting::DeviceNChannels));  // 1..64, else the default (32)
}

// LOOM_DEVICE_FIFO_SLOTS and LOOM_DEVICE_CHUNK_BYTES, fitted to the job at setup unless one is set
// (fifo_layout.h); across hosts, the host transports' LOOM_FIFO_SLOTS and LOOM_CHUNK_BYTES then.
DeviceFifoLayout deviceFifoLayoutSetting() {
  DeviceFifoLayout l;
  l.nslots = static_cast<uint32_t>(settingInt(Setting::DeviceFifoSlots));
  l.slotBytes = static_cast<size_t>(settingInt(Setting::DeviceChunkBytes));
  l.fit = !settingIsSet(Setting::DeviceChunkBytes) && !settingIsSet(Setting::DeviceFifoSlots);
  l.acrossHostsNslots = static_cast<uint32_t>(settingInt(Setting::FifoSlots));
  l.acrossHostsSlotBytes = static_cast<size_t>(settingInt(Setting::ChunkBytes));
  return l;
}

// LOOM_NET_LANE_CHANNELS: the channels a plan kernel uses in a job of several hosts, each with its own
// network lane to every peer on another host (as NCCL runs few channels per NIC). Every rank must use
// the same value.
uint32_t netLaneChannelSetting(uint32_t most) {
  const int64_t v = settingInt(Setting::NetLaneChannels);  // 1..64, else the default (4)
  if (v <= most) return static_cast<uint32_t>(v);
  LOOM_WARN(Init, "LOOM_NET_LANE_CHANNELS={} is more than the {} device channels; using {}", v, most, most);
  return most;
}

const char* slotsName(NetLanes::Slots slots) {
  switch (slots) {
    case NetLanes::Slots::GpuDmabuf: return "GPU memory (GPUDirect RDMA through dmabuf)";
    case NetLanes::Slots::GpuPeermem: return "GPU memory (GPUDirect RDMA through nvidia-peermem)";
    case NetLanes::Slots::HostPinned: break;
  }
  return "pinned host memory";
}

// Encoded plans of small operations take the smallest pinned class (64 KiB); a few of those, and one
// block for a large operation's plans, are allocated at setup so that the first launches find them
// cached (pinned_pool.h says why that matters).
constexpr size_t kWarmSmallBlocks = 8;
constexpr size_t kWarmSmallBytes = size_t{64} << 10;
constexpr size_t kWarmLargeBytes = size_t{2} << 20;

// Pinned blocks (and an abort word) allocated before the setup's exchanges: a rank that finished them
// may launch at once, and a pinned allocation made after that could wait behind its kernel.
Status warmPinnedPool() {
  std::vector<PinnedBlock> blocks(kWarmSmallBlocks + 1);
  for (size_t i = 0; i < kWarmSmallBlocks; ++i) LOOM_TRY(blocks[i].acquire(kWarmSmallBytes));
  return blocks.back().acquire(kWarmLargeBytes);  // released into the pool when `blocks` goes
}

// Every kernel a launch may use, loaded now: with lazy loading (the default since CUDA 12.2) the first
// launch of a kernel may synchronize the context, which deadlocks while a peer's plan kernel in this
// process waits for this rank's launch.
Status loadKernels() {
  LOOM_CUDA_TRY(cuda::loadElementwiseKernels());
  LOOM_CUDA_TRY(cuda::loadStreamGateKernel());
  LOOM_CUDA_TRY(cuda::loadPlanKernels());
  return Status::Ok();
}

bool isLegacyStream(loomStream_t stream) { return stream == nullptr || stream == cudaStreamLegacy; }

}  // namespace

PlanKernels::~PlanKernels() {
  if (failed_.load()) raiseAbort();
  std::vector<std::shared_ptr<KernelLaunch>> pending;
  {
    // They stay in launches_ while they are waited for, where a peer lost meanwhile looks (its settler
    // stops them if they wait on it); the proxy's thread may reap them too.
    std::lock_guard<std::mutex> lock(mutex_);
    destroying_ = true;
    for (size_t i = 0; i < launches_.size(); ++i) pending.push_back(launches_.at(i));
  }
  if (fifos_) {  // launches run on the transport's GPU
    DeviceScope scope(fifos_->device());
    for (auto& launch : pending) {
      launch->done.wait();
      // A launch nobody looked at (the last ones before the communicator goes) whose lanes failed: a
      // peer may still write into this rank's block (a slot of a message this rank gave up on), so it
      // is kept, as after any failure the communicator knew of.
      for (const KernelLaunch::Entry& e : launch->entries)
        if (!devicePlanResult(*e.plan, std::span(launch->statuses + e.firstStatus, e.plan->lanes.size())).ok())
          failed_.store(true);
    }
  }
  peerWatch_.reset();  // its thread calls peerLost, which may start the settler
  stopSettler();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    while (!launches_.empty()) launches_.pop_front();
  }
  netProxy_.reset();  // before the members it calls back into (and the FIFOs it moves) go
  // Every launch object goes now, while the slot ring they give their slots back to still exists (the
  // last launch is also held for its event).
  lastLaunch_.reset();
  spareLaunches_.clear();
  pending.clear();
  if (fifos_) {
    DeviceScope scope(fifos_->device());
    for (char* sequence : cache_.takeAll()) cudaFree(sequence);  // the launches that read them have ended
  }
  if (fifos_ && failed_.load()) fifos_->keepBlockAfterFailure();
  if (abortFlag_.host) flags_.release(abortFlag_);
}

void PlanKernels::raiseAbort() {
  failed_.store(true);
  raiseAbortWord();
}

void PlanKernels::raiseAbortWord() {
  // Any thread may raise it (a failure, loomCommAbort, a lost peer) while lanes read it: an atomic
  // store, as the lanes' loads are (a GPU reads the pinned word with volatile loads; the host emulation
  // with atomic ones, and ThreadSanitizer holds a plain store against them).
  if (volatile uint32_t* word = abortWord_.load())
    std::atomic_ref<uint32_t>(const_cast<uint32_t&>(*word)).store(1, std::memory_order_release);
}

void PlanKernels::fail(const Status& error) {
  raiseAbort();
  facts_.fail(error);
}

Status PlanKernels::setUp(int gpu) {
  P2pFifoOptions options;
  options.nchannels = deviceChannelSetting();
  options.layout = deviceFifoLayoutSetting();
  options.policy = p2pPolicyFromEnvironment();
  options.netLanes = static_cast<bool>(facts_.netLanes.start);
  options.peerMemory = settingFlag(Setting::DevicePeerMemory);
  lowLatencyBytes_ = lowLatencyBytesSetting();
  p2pDirect_ = settingFlag(Setting::P2pDirect);
  profile_ = settingFlag(Setting::DeviceProfile);
  {
    DeviceScope scope(gpu);
    LOOM_CUDA_TRY(scope.error());
    Status local = loadKernels();
    if (local.ok() && !abortFlag_.host) local = flags_.acquire(&abortFlag_);  // kept if a setup is retried
    if (local.ok()) local = warmPinnedPool();
    if (local.ok() && !slots_.allocated()) local = slots_.allocate(PlanSlots::kDefaultCount, PlanSlots::kDefaultBytes);
    cudaMemPool_t pool = nullptr;
    if (local.ok()) local = launchPool(gpu, &pool);
    if (!local.ok()) return local.withContext(facts_.describe + ": device plans");
  }
  abortWord_.store(abortFlag_.host);
  if (failed_.load()) *abortFlag_.host = 1;  // failed before the word existed
  std::string why;
  LOOM_TRY(P2pFifos::create(*facts_.exchange, facts_.processes, gpu, options, &fifos_, &why, &required_)
               .withContext(facts_.describe + ": device plans"));
  if (why.empty() && fifos_->hasNetPeers()) {
    DeviceScope scope(gpu);
    LOOM_TRY(startNetLanes(&why).withContext(facts_.describe + ": network lanes of plan kernels"));
  }
  if (!why.empty()) {
    setup_ = PlanKernelSetup::Unavailable;
    refusal_ = why;
    if (required_)
      return errorStatus(loomInvalidUsage, "{}: LOOM_DEVICE_PLANS=require, but plan kernels cannot run: {}",
                         facts_.describe, why);
    LOOM_INFO(Init, "{}: device buffers are staged through host memory: {}", facts_.describe, why);
    return Status::Ok();
  }
  setup_ = PlanKernelSetup::Ready;
  if (!fifos_->ipcPeers().empty())
    peerWatch_ = std::make_unique<PeerProcessWatch>(fifos_->ipcPeers(), [this](const PeerProcess& p) {
      peerLost(p.rank, errorStatus(loomRemoteError,
                                   "rank {} (pid {}, its FIFOs mapped through CUDA IPC) died (its process exited)", p.rank,
                                   p.pid));
    });
  // Windows registered before the setup (collectively, so on every rank alike) are mapped now.
  if (windows_ && fifos_->peerReach() == PeerReach::Windows)
    LOOM_TRY(windows_->mapAll(gpu).withContext(facts_.describe + ": windows"));
  LOOM_INFO(Init, "{}: device buffers run as plan kernels on GPU {}", facts_.describe, gpu);
  return Status::Ok();
}

Status PlanKernels::startNetLanes(std::string* why) {
  // The channel count first: the proxies' connection records are sized by it.
  const uint32_t laneChannels = netLaneChannelSetting(fifos_->nchannels());
  std::vector<uint32_t> counts(facts_.nranks);
  LOOM_TRY(facts_.exchange->allGather(&laneChannels, counts.data(), sizeof laneChannels));
  for (uint32_t theirs : counts)
    if (theirs != laneChannels) {
      *why = fmt::format("ranks use {} and {} network lane channels: LOOM_NET_LANE_CHANNELS must agree", laneChannels,
                         theirs);
      return Status::Ok();
    }
  Status local = NetLaneFifos::allocate(fifos_->device(), facts_.netLanes.slots, fifos_->netPeers(), fifos_->nchannels(),
                                        laneChannels, fifos_->nslots(), fifos_->slotBytes(),
                                        &netFifos_);
  NetLaneTables tables;
  tables.nchannels = fifos_->nchannels();
  tables.laneChannels = laneChannels;
  if (netFifos_) tables = netFifos_->tables();
  Status started = facts_.netLanes.start(tables, local, [this](int peer, const Status& error) { peerLost(peer, error); },
                                         &netProxy_);
  // Every rank says whether its proxy started (connections fail on the ranks that see it), so that all
  // run plan kernels, or none.
  LOOM_TRY(agreeOnSetupStep(*facts_.exchange, started.ok() ? "" : fmt::format("rank {}: {}", facts_.rank,
                                                                               started.message()),
                            why));
  if (!why->empty()) {
    netProxy_.reset();
    return Status::Ok();
  }
  fifos_->adoptNetFifos(tables);
  size_t peers = 0;
  for (bool net : fifos_->netPeers()) peers += net ? 1 : 0;
  LOOM_INFO(Init, "{}: plan kernels reach {} peer(s) on other hosts through network lanes ({} channel(s), slots in {}: "
            "{}; {} KiB pinned host memory, {} KiB GPU memory)",
            facts_.describe, peers, laneChannels, slotsName(facts_.netLanes.slots), facts_.netLanes.why,
            netFifos_->hostBytes() >> 10, netFifos_->gpuBytes() >> 10);
  return Status::Ok();
}

uint32_t PlanKernels::launchChannels() const {
  // With network lanes, only their channels reach the peers on other hosts.
  return netProxy_ ? netFifos_->tables().laneChannels : fifos_->nchannels();
}

DeviceFabric PlanKernels::fabric() const {
  DeviceFabric f;
  if (!fifos_) return f;
  f.slotBytes = fifos_->slotBytes();
  f.fifoSlots = static_cast<int>(fifos_->nslots());
  f.maxChannels = static_cast<int>(std::max(1u, std::min(launchChannels(), fifos_->laneBudget())));
  f.gpuCopyGbs = fifos_->gpuCopyGbs();
  f.ranksPerGpu = fifos_->ranksPerGpu();
  f.peerMemory = fifos_->peerReach() == PeerReach::AnyBuffer;
  f.peerMemoryInWindows = fifos_->peerReach() == PeerReach::Windows;
  return f;
}

Status PlanKernels::registerWindow(void* p, size_t bytes, uint32_t* slot) {
  if (!windows_) windows_ = std::make_unique<PeerWindows>(*facts_.exchange, facts_.processes);
  const bool ready = setup_ == PlanKernelSetup::Ready;
  const bool map = ready && fifos_->peerReach() == PeerReach::Windows;
  return windows_->add(p, bytes, ready ? fifos_->device() : -1, map, slot).withContext(facts_.describe);
}

Status PlanKernels::deregisterWindow(uint32_t slot) {
  if (!windows_) return invalidArgument("{}: window deregistration: no window was registered", facts_.describe);
  // Launches in flight may read the window: they end first (they wait for no host work of this rank;
  // launches follow each other, so the last one's end is every one's). Core holds the communicator.
  if (lastLaunch_)
    lastLaunch_->done.wait();
  else
    lastMark_.wait();
  return windows_->remove(slot).withContext(facts_.describe);
}

std::pair<void*, size_t> PlanKernels::window(uint32_t slot) const {
  return windows_ ? windows_->window(slot) : std::pair<void*, size_t>{nullptr, 0};
}

bool PlanKernels::inWindows(const void* send, size_t sendBytes, const void* recv, size_t recvBytes) const {
  if (setup_ != PlanKernelSetup::Ready || fifos_->peerReach() != PeerReach::Windows || !windows_) return false;
  return send && recv && windows_->holds(send, sendBytes) && windows_->holds(recv, recvBytes);
}

Status PlanKernels::adjustChannels(Algorithm algo, PlanRequest* req) {
  const auto key = std::make_tuple(static_cast<int>(req->coll), static_cast<int>(algo), req->root);
  auto found = lanesPerChannel_.find(key);
  if (found == lanesPerChannel_.end()) {
    uint64_t lanes = 0;
    LOOM_TRY(maxLanesPerChannel(algo, *req, &lanes));
    found = lanesPerChannel_.emplace(key, lanes).first;
  }
  // Even one channel of this shape cannot be resident on the busiest rank's share of its GPU: every
  // rank refuses alike (the lane counts are every rank's), before anything is launched.
  if (found->second > fifos_->residentShare())
    return errorStatus(loomInvalidUsage,
                       "{}: a {} over {} ranks needs {} thread blocks per channel at once, more than the {} that each "
                       "rank's share of its GPU holds resident: use fewer ranks per GPU, or another algorithm "
                       "(LOOM_ALGO)",
                       facts_.describe, collectiveName(req->coll), req->nranks, found->second, fifos_->residentShare());
  const DeviceChannelLimits limits{static_cast<int>(launchChannels()), fifos_->laneBudget()};
  req->nchannels = deviceChannels(req->nchannels, found->second, limits);
  return Status::Ok();
}

Status PlanKernels::checkLaunchable(const std::vector<KernelPlan>& plans, std::span<const loomStream_t> streams) const {
  // A misaligned element would be a misaligned-address trap on the GPU, which kills the context and
  // with it every rank of this process.
  auto misaligned = [](const KernelPlan& kp, const char* p) {
    return errorStatus(loomInvalidArgument, "{}: a buffer at {} is not aligned to its {}-byte elements", kp.label.text(),
                       static_cast<const void*>(p), kp.elemSize);
  };
  for (const KernelPlan& kp : plans) {
    for (const char* p : kp.buffers)
      if (reinterpret_cast<uintptr_t>(p) % kp.elemSize != 0) return misaligned(kp, p);
    if (reinterpret_cast<uintptr_t>(kp.stageFrom) % kp.elemSize != 0) return misaligned(kp, kp.stageFrom);
  }
  // The legacy stream is one queue for every thread of the process: a plan kernel there would wait
  // for a same-GPU peer's kernel queued behind it.
  for (loomStream_t stream : streams)
    if (isLegacyStream(stream) && fifos_->sharesGpuInThisProcess())
      return errorStatus(loomInvalidUsage,
                         "{}: {} runs as a plan kernel, and another rank of this process shares GPU {}: the legacy "
                         "default stream (stream NULL) would serialize their kernels, which wait for each other; "
                         "pass a stream of your own (cudaStreamCreateWithFlags(..., cudaStreamNonBlocking))",
                         facts_.describe, plans.front().label.text(), fifos_->device());
  return Status::Ok();
}

Status PlanKernels::launch(std::vector<KernelPlan>& plans, std::span<const loomStream_t> streams) {
  // Finished launches are reaped when a slot is taken (takeSlot), not at every call: one event query
  // per reap, and a reap frees many. A captured launch's replays report in its statuses (no CUDA call).
  {
    std::lock_guard<std::mutex> lock(mutex_);
    reapCapturedLocked();
  }
  if (failed_.load()) return errorStatus(loomInvalidUsage, "{} is unusable after an earlier error", facts_.describe);
  if (plans.empty()) return Status::Ok();
  LOOM_TRY(checkLaunchable(plans, streams));

  DeviceScope scope(fifos_->device());
  LOOM_CUDA_TRY(scope.error());
  const loomStream_t stream = streams.front();
  std::vector<loomStream_t> others;
  for (loomStream_t s : streams)
    if (s != stream && std::find(others.begin(), others.end(), s) == others.end()) others.push_back(s);
  // In a CUDA graph capture every stream of the group must be in the same one. A captured launch is
  // not ordered after the communicator's earlier launches (an event from outside the capture would
  // invalidate it): the application orders replays with the communicator's other work, as with NCCL.
  StreamCapture capture;
  LOOM_TRY(captureOf(stream, &capture));
  for (loomStream_t other : others) {
    StreamCapture c;
    LOOM_TRY(captureOf(other, &c));
    if (c.active != capture.active || c.id != capture.id)
      return errorStatus(loomInvalidUsage,
                         "{}: the streams of one group must all be captured into the same CUDA graph, or none",
                         facts_.describe);
  }
  // After this communicator's previous launch (in this capture, when capturing) and after everything
  // already on the group's streams.
  if (!capture.active) LOOM_TRY(lastLaunch_ ? lastLaunch_->done.orderBefore(stream) : lastMark_.orderBefore(stream));
  if (capture.active && lastCaptureId_ == capture.id) LOOM_TRY(lastCaptured_.orderBefore(stream));
  for (loomStream_t other : others) {
    EventHandle joined;
    LOOM_TRY(joined.record(other));
    LOOM_TRY(joined.orderBefore(stream));
  }
  Status launched;
  std::shared_ptr<KernelLaunch> last;  // the last eager launch enqueued here: its event marks the end
  for (size_t first = 0; first < plans.size() && launched.ok();) {
    size_t end = first;
    while (end < plans.size() && plans[end].dtype == plans[first].dtype) ++end;
    launched = launchRun(plans, first, end, stream, capture.active, &last);
    first = end;
  }
  // Whatever was enqueued, later work on these streams and later launches wait for it: the last
  // launch's own event when its kernel was the last work enqueued (runs enqueue nothing after it),
  // else an event recorded now.
  Status ordered;
  const EventHandle* after = nullptr;
  if (capture.active) {
    ordered = lastCaptured_.record(stream);
    lastCaptureId_ = capture.id;
    after = &lastCaptured_;
  } else if (last && launched.ok()) {
    lastLaunch_ = std::move(last);
    after = &lastLaunch_->done;
  } else {
    ordered = lastMark_.record(stream);
    lastLaunch_.reset();
    after = &lastMark_;
  }
  for (loomStream_t other : others)
    if (ordered.ok()) ordered = after->orderBefore(other);
  if (launched.ok()) launched = ordered;
  if (!launched.ok()) fail(launched);  // the peers' lanes wait for this rank: stop ours, fail the call
  if (netProxy_) netProxy_->wake();
  if (peerLostKnown_.load()) {
    std::lock_guard<std::mutex> lock(mutex_);
    checkPeersLocked();  // a peer lost before this launch: the launch would wait on it
  }
  return launched;
}

void PlanKernels::reapLocked() {
  if (launches_.empty()) return;
  DeviceScope scope(fifos_->device());  // launches run on the transport's GPU
  while (!launches_.empty()) {
    KernelLaunch& l = *launches_.front();
    bool done = false;
    Status query = l.done.query(&done);
    if (!query.ok()) {
      fail(query.withContext("watching a device launch"));
      return;  // the stream is broken: its launches stay until the communicator goes
    }
    if (!done) return;
    if (profile_) addProfile(l);
    for (const KernelLaunch::Entry& e : l.entries) {
      Status result = devicePlanResult(*e.plan, std::span(l.statuses + e.firstStatus, e.plan->lanes.size()));
      // Lanes stopped by the abort word after the communicator failed say only that: the failure that
      // raised it (a broken network lane, a peer's) was reported already and stays the one users see.
      if (!result.ok() && !failed_.load()) {
        fail(result.withContext(e.label.text()));
        break;
      }
    }
    // Its slot goes back now (whoever else holds the launch, as lastLaunch_ may, needs only its event);
    // one nobody else holds is kept for a later launch.
    std::shared_ptr<KernelLaunch> finished = std::move(launches_.front());
    launches_.pop_front();
    finished->releaseSlot();
    if (finished.use_count() == 1 && spareLaunches_.size() < PlanSlots::kDefaultCount) {
      finished->recycle();
      spareLaunches_.push_back(std::move(finished));
    }
  }
}

std::shared_ptr<KernelLaunch> PlanKernels::newLaunch() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!spareLaunches_.empty()) {
      std::shared_ptr<KernelLaunch> launch = std::move(spareLaunches_.back());
      spareLaunches_.pop_back();
      return launch;
    }
  }
  return std::make_shared<KernelLaunch>();
}

Status PlanKernels::takeSlot(KernelLaunch* launch) {
  for (;;) {
    std::shared_ptr<KernelLaunch> oldest;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      int slot = slots_.take();
      // Finished launches give their slots back and their failures are reported in one reap once half
      // the ring is in use, and then again once half of what was left free after it is (each reap costs
      // event queries and frees every launch that finished; launches that run long are not queried at
      // every call).
      if (slot < 0 || slots_.freeCount() < reapBelow_) {
        {
          RelaxedCaptureMode relaxed;  // event queries while some thread captures (Run::relaxed says why)
          reapLocked();
        }
        const size_t nowFree = slots_.freeCount();
        reapBelow_ = nowFree >= slots_.count() / 2 ? slots_.count() / 2 : nowFree / 2;
      }
      if (failed_.load()) {
        if (slot >= 0) slots_.give(slot);
        return errorStatus(loomInvalidUsage, "{} is unusable after an earlier error", facts_.describe);
      }
      if (slot < 0) slot = slots_.take();
      if (slot >= 0) {
        launch->slots = &slots_;
        launch->slot = slot;
        return Status::Ok();
      }
      // Every slot is held by a launch in launches_ (captured launches hold none).
      if (launches_.empty()) return errorStatus(loomInternalError, "{}: no plan slot is free, and no launch holds one", facts_.describe);
      oldest = launches_.front();
    }
    oldest->done.wait();
  }
}

// A failure some replay of a captured launch reported (lanes that have not reported yet, or report
// done, are no failure: a replay may be running).
void PlanKernels::reapCapturedLocked() {
  if (failed_.load()) return;  // already failed (and told): a failure stays in the statuses
  // A lane that fails raises the abort word (plan_interpreter.cuh's runLane), and nothing else raises
  // it before failed_ is set but a lost peer (settleLostPeerLocked): while it is down no replay failed,
  // and the captured launches, however many, are not looked at (one read of pinned memory per call).
  if (captured_.empty() || !abortFlag_.host || *abortFlag_.host == 0) return;
  for (const auto& l : captured_)
    for (const KernelLaunch::Entry& e : l->entries) {
      const std::span<const cuda::DeviceLaneStatus> lanes(l->statuses + e.firstStatus, e.plan->lanes.size());
      const bool failed = std::any_of(lanes.begin(), lanes.end(), [](const cuda::DeviceLaneStatus& s) {
        const auto outcome = static_cast<cuda::DeviceLaneOutcome>(
            std::atomic_ref<uint32_t>(const_cast<uint32_t&>(s.outcome)).load(std::memory_order_acquire));
        return outcome != cuda::DeviceLaneOutcome::NotReported && outcome != cuda::DeviceLaneOutcome::Done;
      });
      if (!failed) continue;
      // Stopped by a lost peer's abort word: that peer is the reason.
      fail(peerBroken_.ok() ? devicePlanResult(*e.plan, lanes).withContext(e.label.text() + ", in a CUDA graph")
                            : peerBroken_.withContext(e.label.text() + ", in a CUDA graph"));
      return;
    }
}

void PlanKernels::addProfile(const KernelLaunch& l) {
  loomDeviceProfile_t& t = profileTotals_;
  ++t.launches;
  for (const KernelLaunch::Entry& e : l.entries)
    for (size_t i = 0; i < e.plan->lanes.size(); ++i) {
      const cuda::DeviceLaneStatus& s = l.statuses[e.firstStatus + i];
      if (static_cast<cuda::DeviceLaneOutcome>(s.outcome) == cuda::DeviceLaneOutcome::NotReported) continue;
      ++t.lanes;
      t.steps += s.step;
      t.bytes += s.profile.bytes;
      t.waitNs += s.profile.waitNs;
      t.dataNs += s.profile.dataNs;
      t.publishNs += s.profile.publishNs;
      t.laneNs += s.profile.laneNs;
    }
}

Status PlanKernels::profile(bool reset, loomDeviceProfile_t* out) {
  if (setup_ != PlanKernelSetup::Ready)
    return errorStatus(loomInvalidUsage, "{}: no plan kernels to profile ({})", facts_.describe,
                       setup_ == PlanKernelSetup::NotYet ? "no device operation ran as one yet" : refusal_);
  if (!profile_)
    return errorStatus(loomInvalidUsage, "{}: plan kernels are not profiled (LOOM_DEVICE_PROFILE=1 profiles them)",
                       facts_.describe);
  std::lock_guard<std::mutex> lock(mutex_);
  {
    RelaxedCaptureMode relaxed;  // event queries while some thread captures a graph (launch() says why)
    reapLocked();
  }
  *out = profileTotals_;
  if (reset) profileTotals_ = {};
  return Status::Ok();
}

DeviceProgress PlanKernels::progress() {
  // The thread that holds mutex_ may be the one asking: a reap that fails the communicator after a
  // lane timed out logs the job's hang report, which reads this rank's state. So the lock is only
  // tried, for a few milliseconds, and the last answer given when it stays taken.
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  for (int i = 0; i < 20 && !lock.owns_lock(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    lock.try_lock();
  }
  if (!lock.owns_lock()) return DeviceProgress{lastFirstUnfinished_.load(), lastWaitingOn_.load()};
  DeviceProgress p;
  if (launches_.empty()) return remember(p);
  DeviceScope scope(fifos_->device());
  RelaxedCaptureMode relaxed;  // as poll()
  // Launches end in order (each follows the one before); the first one whose event has not passed is
  // where the communicator's device work stands. Nothing is reaped here: the caller may be any thread.
  for (size_t i = 0; i < launches_.size(); ++i) {
    const std::shared_ptr<KernelLaunch>& l = launches_.at(i);
    bool done = false;
    if (!l->done.query(&done).ok() || done || l->entries.empty()) continue;
    p.firstUnfinished = l->entries.front().seq;
    l->forEachWait([&p](int peer) {
      if (p.waitingOn < 0) p.waitingOn = peer;
    });
    break;
  }
  return remember(p);
}

DeviceProgress PlanKernels::remember(const DeviceProgress& p) {
  lastFirstUnfinished_.store(p.firstUnfinished);
  lastWaitingOn_.store(p.waitingOn);
  return p;
}

void PlanKernels::poll() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (launches_.empty() && captured_.empty()) return;  // no CUDA call for communicators without launches
  RelaxedCaptureMode relaxed;  // event queries while some thread captures a graph (launch() says why)
  reapLocked();
  reapCapturedLocked();
}

Status setUpPlanKernels(std::span<const std::pair<CommDevice*, int>> pending) {
  auto setUp = [](const std::pair<CommDevice*, int>& p) { return static_cast<CudaCommDevice&>(*p.first).kernels().setUp(p.second); };
  if (pending.size() == 1) return setUp(pending[0]);
  std::vector<Status> results(pending.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < pending.size(); ++i) threads.emplace_back([&, i] { results[i] = setUp(pending[i]); });
  for (std::thread& t : threads) t.join();
  for (const Status& st : results) LOOM_TRY(st);
  return Status::Ok();
}

}  // namespace loom::device
