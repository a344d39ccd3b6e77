// Device buffers run by the plan kernel: an operation whose buffers are all in GPU memory runs as a
// kernel on the caller's stream that walks this rank's plan steps over the p2p transport's FIFOs
// (p2p_fifos.h), with no copy through host memory and no host thread involved, as in NCCL. The host
// returns once the launch is enqueued.
//
// - Set up at a communicator's first operation on device buffers, collectively (every rank makes that
//   call): the ranks first agree whether every pair of one host can reach each other's GPU memory,
//   and only then allocate and map the FIFOs; peers on other hosts are reached through network lanes
//   (net_lane_fifos.h: FIFOs in this rank's memory that core's proxy moves over the network). When
//   not (GPUs without peer access, ranks sharing one GPU without LOOM_DEVICE_PLANS=1, ranks on other
//   hosts without network lanes, LOOM_DEVICE_PLANS=0 anywhere), every rank stages
//   device buffers through host memory (staging.h), or, with LOOM_DEVICE_PLANS=require on any rank,
//   fails the operation with the reason. Setup also loads every kernel the launches may use (lazy
//   loading could otherwise synchronize the context while a peer's kernel waits), allocates the ring
//   of slots the launches' statuses live in (plan_slots.h), warms the pinned pool, and makes the
//   stream-ordered memory pool the launches' workspace comes from (stream_pool.h). After warm-up a
//   launch allocates nothing, synchronizes nothing and copies nothing to the GPU: its encoded plans
//   are on the device by shape (plan_cache.h), its call is the kernel's parameter.
// - An operation runs here when every buffer it uses on this rank is device memory on the
//   communicator's GPU (PreMulSum: the input is scaled into a temporary on the stream first, and the
//   plan is a sum). Ranks must agree on the memory kind of each call, as NCCL requires device memory
//   everywhere: a rank whose buffers are host memory while its peers' are on the device runs another
//   transport, and both sides time out.
// - One launch per communicator and run of same-dtype operations of a group: its blocks run the
//   operations' plans one after the other (kernels/cuda/plan_launch.h). Launches of one communicator
//   are ordered after each other whatever streams they are on (the FIFOs are shared), and a group's
//   launch after every stream its operations named (and those streams after it).
// - CUDA graphs: a launch on a stream being captured is captured (its encoded plans and temporaries
//   in device memory allocated and filled outside the capture, its lanes' statuses in pinned memory,
//   all kept for the communicator's lifetime, so the graph holds no memory nodes and no plan copy; a
//   failure in any replay is reported like any other). The communicator must have set up its
//   transport before (one operation on device buffers outside the capture), a captured launch follows
//   the communicator's earlier launches of the same capture only, and the application orders replays
//   with the communicator's other work and ends them before destroying it, as NCCL asks.
// - Errors: every lane reports how it ended into pinned host memory; a launch whose lanes failed (a
//   timeout after LOOM_TIMEOUT_MS, a message of the wrong size, an abort) fails the communicator,
//   seen by loomCommGetAsyncError and the next call. loomCommAbort and any other failure of the
//   communicator raise the abort word every waiting lane watches.
// - The flight record: each operation carries its number (KernelPlan::seq); progress() says which is
//   the first whose launch has not ended and whom its lanes wait on (a lane that waited long writes the
//   peer into its status), so that the hang report and loom-doctor line device operations up too.
//
// CUDA builds only; no CUDA header is needed to include this file.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "device/device_layer.h"
#include "device/event_handle.h"
#include "device/host_flags.h"
#include "device/net_lane_fifos.h"
#include "device/p2p_fifos.h"
#include "device/peer_process_watch.h"
#include "device/peer_windows.h"
#include "device/pinned_pool.h"
#include "device/plan_cache.h"
#include "device/plan_slots.h"
#include "device/stream_pool.h"

namespace loom::device {

// One launch until its stream passed it: the encoded plans and the lanes' statuses live in one
// pinned block (the kernel writes the statuses there), kept until then: a slot of the communicator's
// ring (plan_slots.h), or, for an encoding larger than a slot and for captured launches, which keep
// theirs for the communicator's lifetime, a block of their own.
struct KernelLaunch {
  struct Entry {
    std::shared_ptr<const Plan> plan;
    OperationLabel label;  // the operation, for a failure's message
    size_t firstStatus = 0;
    uint64_t seq = 0;  // KernelPlan::seq
  };
  KernelLaunch() = default;
  ~KernelLaunch() { releaseSlot(); }
  void releaseSlot() {
    if (slots) slots->give(slot);
    slots = nullptr;
    slot = -1;
  }
  // Ready for another launch (PlanKernels recycles finished ones: no allocation and no event created
  // per launch); its event is kept.
  void recycle() {
    releaseSlot();
    blob.release();
    if (pageableEncoding.capacity() > (size_t{1} << 20)) std::vector<std::byte>().swap(pageableEncoding);
    statuses = nullptr;
    entries.clear();
  }
  KernelLaunch(const KernelLaunch&) = delete;
  KernelLaunch& operator=(const KernelLaunch&) = delete;
  // Calls `seen(peer)` for each lane that notes a long wait on `peer` (DeviceLaneStatus::waitingOn, which
  // the kernel writes while it runs: each word read once, as one that may change under us).
  template <typename Seen>
  void forEachWait(Seen seen) const {
    for (const Entry& e : entries)
      for (size_t lane = 0; lane < e.plan->lanes.size(); ++lane) {
        const uint32_t w =
            std::atomic_ref<uint32_t>(statuses[e.firstStatus + lane].waitingOn).load(std::memory_order_relaxed);
        if (w != 0) seen(static_cast<int>(w) - 1);
      }
  }
  PlanSlots* slots = nullptr;  // with `slot`, when the launch holds a ring slot
  int slot = -1;
  PinnedBlock blob;  // what a slot would hold (statuses, tables, an encoding on its way) when none does
  // An encoding on its way to the device that does not fit the slot beside the statuses: pageable
  // memory, kept until the launch ended (its copy is stream-ordered). Pinned memory allocated at launch
  // time (cudaHostAlloc) may synchronize the device, which deadlocks while a peer's kernel waits for
  // this rank's launch; a copy from pageable memory waits only for this stream's earlier work.
  std::vector<std::byte> pageableEncoding;
  cuda::DeviceLaneStatus* statuses = nullptr;
  std::vector<Entry> entries;
  EventHandle done;
};

// The launches in flight, oldest first: a ring that only grows (to the most launches ever in flight),
// so that a steady launch allocates nothing for its place in it (a std::deque takes and frees a block
// every few dozen launches).
class LaunchQueue {
 public:
  bool empty() const { return count_ == 0; }
  size_t size() const { return count_; }
  std::shared_ptr<KernelLaunch>& front() { return ring_[head_]; }
  std::shared_ptr<KernelLaunch>& at(size_t i) { return ring_[(head_ + i) % ring_.size()]; }
  void push_back(std::shared_ptr<KernelLaunch> launch) {
    if (count_ == ring_.size()) {  // full: twice the room, the launches in order from the start
      std::vector<std::shared_ptr<KernelLaunch>> grown(std::max<size_t>(16, 2 * ring_.size()));
      for (size_t i = 0; i < count_; ++i) grown[i] = std::move(at(i));
      ring_.swap(grown);
      head_ = 0;
    }
    ring_[(head_ + count_) % ring_.size()] = std::move(launch);
    ++count_;
  }
  void pop_front() {
    ring_[head_].reset();
    head_ = (head_ + 1) % ring_.size();
    --count_;
  }

 private:
  std::vector<std::shared_ptr<KernelLaunch>> ring_;
  size_t head_ = 0, count_ = 0;
};

class PlanKernels {
 public:
  explicit PlanKernels(const CommFacts& facts) : facts_(facts) {}
  ~PlanKernels();  // raises the abort word if the communicator failed, then waits for the launches
  PlanKernels(const PlanKernels&) = delete;
  PlanKernels& operator=(const PlanKernels&) = delete;

  // Read and changed under the communicator's `busy` lock (core holds it around every operation).
  PlanKernelSetup setup() const { return setup_; }
  const std::string& refusal() const { return refusal_; }
  bool required() const { return required_; }
  int gpu() const { return fifos_ ? fifos_->device() : -1; }
  DeviceFabric fabric() const;  // when Ready
  // The channels a launch may use: the FIFOs', or with network lanes theirs (only those reach peers on
  // other hosts).
  uint32_t launchChannels() const;
  // Collective (every rank of the communicator): device_layer.h's setUpPlanKernels.
  Status setUp(int gpu);
  Status adjustChannels(Algorithm algo, PlanRequest* req);
  Status launch(std::vector<KernelPlan>& plans, std::span<const loomStream_t> streams);

  // From any thread.
  void raiseAbort();
  void poll();
  Status profile(bool reset, loomDeviceProfile_t* out);  // device_layer.h's CommDevice::profile
  DeviceProgress progress();                             // device_layer.h's CommDevice::progress
  // device_layer.h's CommDevice windows (peer_windows.h)
  Status registerWindow(void* p, size_t bytes, uint32_t* slot);
  Status deregisterWindow(uint32_t slot);
  std::pair<void*, size_t> window(uint32_t slot) const;
  bool inWindows(const void* send, size_t sendBytes, const void* recv, size_t recvBytes) const;

 private:
  // Nothing enqueued yet: what launch() refuses (alignment, the legacy stream, mixed captures).
  Status checkLaunchable(const std::vector<KernelPlan>& plans, std::span<const loomStream_t> streams) const;
  // Encodes plans [first, end) (one dtype) as one sequence and launches it on `stream` (kernel_launch.cc),
  // in the steps below, which share one Run.
  Status launchRun(std::vector<KernelPlan>& plans, size_t first, size_t end, loomStream_t stream, bool captured,
                   std::shared_ptr<KernelLaunch>* enqueued);
  struct Run;
  struct RunDeleter {
    void operator()(Run* run) const;  // (kernel_launch.cc, where a Run is complete)
  };
  // Staged inputs and scratch, carved from one region of the workspace (captured: kept memory).
  Status placeTemporaries(Run& run);
  // Each plan's buffers, FIFOs and limits, its encoded size and its shape key for the cache.
  void bindPlans(Run& run);
  // The pinned block of the lanes' statuses, the call tables and an encoding: a ring slot or its own.
  Status reserveHostBlock(Run& run);
  // The sequence on the device: found by shape, or encoded (every buffer checked) and copied there.
  Status encodeOrFind(Run& run);
  // The kernel's calls: its parameter, or tables in device memory when the parameter cannot hold them.
  Status bindCalls(Run& run);
  // Tables, staged inputs, the kernel; the launch kept until its stream passed it.
  Status enqueueRun(Run& run);
  // A free slot of the ring for `launch`, waiting for this rank's oldest launch while none is
  // (plan_slots.h says why that cannot deadlock).
  Status takeSlot(KernelLaunch* launch);
  // Collective, after the p2p FIFOs are up in a job of several hosts: the network lanes' FIFOs and
  // their proxy. *why is "" when they run, else the reason (the same on every rank).
  Status startNetLanes(std::string* why);
  // A peer lost (lost_peer.cc): the network lanes' proxy reports a broken lane, the peer watch a
  // process (of this host, sharing the GPU) that exited. A launch made after it fails at once (it would
  // wait on the peer). Launches in flight may no longer need it: a peer that finished its part of the
  // last collective and exited is no error. They are watched, on settler_'s thread, until they end
  // (nothing failed), or one of their lanes waits on the lost peer, or on anyone kLostPeerGraceMs after
  // the loss (a peer waiting on the lost one): then the communicator fails with the peer's error.
  // `peer` is -1 when the reporter cannot say which rank.
  void peerLost(int peer, const Status& error);
  void raiseAbortWord();  // stops every waiting lane, without failing the communicator (raiseAbort does)
  void checkPeersLocked();  // after a launch: fails it when a peer was lost before
  // Whether the launches in flight at the loss are decided (ended, or the communicator failed).
  bool settleLostPeerLocked();
  void stopSettler();
  // A finished launch to reuse, or a new one.
  std::shared_ptr<KernelLaunch> newLaunch();
  // Reports and forgets finished launches; reports what a captured launch's replays saw. Under mutex_.
  void reapLocked();
  void reapCapturedLocked();
  void addProfile(const KernelLaunch& l);  // a reaped launch's lanes into profileTotals_ (under mutex_)
  DeviceProgress remember(const DeviceProgress& p);  // progress()'s answer, kept for when mutex_ is taken
  void fail(const Status& error);

  const CommFacts& facts_;
  PlanKernelSetup setup_ = PlanKernelSetup::NotYet;
  std::string refusal_;
  bool required_ = false;  // some rank has LOOM_DEVICE_PLANS=require
  uint64_t lowLatencyBytes_ = 0;  // messages up to this size travel as low-latency words (low_latency.h)
  std::unique_ptr<P2pFifos> fifos_;  // also when unusable: what setup allocated stays until the communicator goes
  // Peers on other hosts: the FIFOs, then the proxy that moves them (destroyed first: it lets go of the
  // slots before they are freed). With a proxy, a launch uses at most the lanes' channels.
  std::unique_ptr<NetLaneFifos> netFifos_;
  std::unique_ptr<NetLaneProxy> netProxy_;
  Status peerBroken_;        // guarded by mutex_: the first peer lost (peerLost)
  std::atomic<bool> peerLostKnown_{false};  // set with peerBroken_: a launch looks under mutex_ only then
  int lostPeer_ = -1;        // guarded by mutex_: its rank, -1 if unknown
  std::chrono::steady_clock::time_point lostAt_;  // guarded by mutex_
  bool destroying_ = false;  // guarded by mutex_: the destructor waits for the launches
  bool settlerStopping_ = false;  // guarded by mutex_
  std::condition_variable settlerWake_;
  std::thread settler_;  // watches the launches in flight when a peer was lost (settleLostPeerLocked)
  // maxLanesPerChannel by (collective, algorithm, root): the same for every operation of that shape.
  std::map<std::tuple<int, int, int>, uint64_t> lanesPerChannel_;
  HostFlags flags_{1};
  HostFlags::Flag abortFlag_;
  // Launches share the FIFOs: each follows the one before. The last eager launch (its `done` event
  // marks its end), or, when the last call launched no kernel, an event recorded after it.
  std::shared_ptr<KernelLaunch> lastLaunch_;
  EventHandle lastMark_;
  bool p2pDirect_ = true;  // LOOM_P2P_DIRECT, read at setup
  bool profile_ = false;   // LOOM_DEVICE_PROFILE, read at setup: plans are encoded to time their steps
  loomDeviceProfile_t profileTotals_ = {};  // the reaped launches' lanes, summed (under mutex_)
  // The same within one CUDA graph capture: the last launch captured, and into which capture.
  EventHandle lastCaptured_;
  unsigned long long lastCaptureId_ = 0;

  std::unique_ptr<Run, RunDeleter> run_;  // launchRun's working state, reused (its vectors keep their capacity)
  PlanSlots slots_;  // before the launches that hold its slots: it outlives them
  PlanCache cache_;  // encoded sequences on the device, by shape (plan_cache.h); freed in the destructor
  LaunchWorkspace workspace_;  // the eager launches' temporaries
  std::mutex mutex_;  // guards launches_ and captured_: loomCommGetAsyncError looks at them from any thread
  LaunchQueue launches_;  // shared pointers: takeSlot waits on the oldest outside mutex_
  std::vector<std::shared_ptr<KernelLaunch>> spareLaunches_;  // finished, for the next launches (under mutex_)
  size_t reapBelow_ = PlanSlots::kDefaultCount / 2;  // takeSlot reaps when fewer slots than this are free
  // Launches captured into CUDA graphs: every replay reads their encoded plans and reports into the
  // same statuses, so they are kept for the communicator's lifetime (the graphs must not be replayed
  // after it).
  std::vector<std::shared_ptr<KernelLaunch>> captured_;
  // Their device memory (encoded plans, temporaries), allocated outside the captures: graph memory
  // nodes could make CUDA order one rank's graph after another's (stream_pool.h).
  std::shared_ptr<KeptDeviceMemory> kept_;
  std::atomic<bool> failed_{false};
  std::atomic<uint64_t> lastFirstUnfinished_{0};  // progress()'s last answer
  std::atomic<int> lastWaitingOn_{-1};
  std::atomic<volatile uint32_t*> abortWord_{nullptr};
  // Last, so destroyed first: its thread calls peerLost, which needs everything above.
  std::unique_ptr<PeerProcessWatch> peerWatch_;
  std::unique_ptr<PeerWindows> windows_;  // made at the first registration
};

}  // namespace loom::device
