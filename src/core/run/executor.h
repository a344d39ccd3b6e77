// The executor: runs plans over a rank's connections. Lanes of a plan progress independently and
// without blocking; when nothing can move, the caller spins briefly, yields, and then sleeps on its
// doorbell (or polls what its network connections name), so oversubscribed ranks leave the cores to
// the ranks that can work.
// A group may run plans of several communicators at once (one thread driving many ranks).
#pragma once

#include <poll.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "algorithms/plan.h"
#include "base/clock.h"
#include "base/status.h"
#include "core/run/core_sharing.h"
#include "core/observe/flight_record.h"
#include "core/run/operation.h"
#include "core/observe/trace.h"
#include "core/run/wait_history.h"
#include "kernels/cpu/reduce.h"
#include "transport/doorbell.h"
#include "transport/transport_set.h"

namespace loom {

// Outputs from this size up, when apart from the input, are written with non-temporal stores
// (kernels/cpu/stream_copy.h): larger than a core's L2 here, so they would leave the cache anyway.
constexpr size_t kStreamOutputBytes = 4u << 20;

// One plan bound to memory: what an operation needs to run on one rank.
struct BoundPlan {
  std::shared_ptr<const Plan> plan;  // shared with the communicator's plan cache
  std::vector<char*> buffers;        // indexed by plan buffer id
  loomDataType_t dtype = loomUint8;
  size_t elemSize = 1;
  ReduceOp op;
  std::vector<char> scratch;     // Plan::scratchElems elements
  bool streamOutput = false;     // copies into the receive buffer use non-temporal stores
  std::vector<char> stagedSend;  // a copy of the send buffer (overlap with the output, PreMulSum)
  int* anySource = nullptr;      // a receive from any source: the sender's rank is written here
  // Filled when the plan starts, not when it is issued: on a nonblocking communicator an earlier
  // queued operation may still write the user's buffer.
  const char* stageFrom = nullptr;
  bool stageScales = false;  // PreMulSum: scale while copying (then op.post is None)
  ReduceOp stageOp;
  // What the operation was, for messages (formatted only when one is needed).
  std::string (*describe)(const BoundPlan&) = nullptr;
  Operation call;
  uint64_t seq = 0;
  size_t groupSize = 0;

  // As a new one, but its vectors keep their capacity (a thread's plans are reused from call to call).
  void recycle() {
    std::vector<char*> b = std::move(buffers);
    std::vector<char> s = std::move(scratch), st = std::move(stagedSend);
    *this = BoundPlan{};
    b.clear(), s.clear(), st.clear();
    buffers = std::move(b), scratch = std::move(s), stagedSend = std::move(st);
  }
};

inline std::string describePlan(const BoundPlan& bp) { return bp.describe ? bp.describe(bp) : "operation"; }

// The plans one communicator runs, in order, and what the executor needs of that communicator.
struct CommWork {
  TransportSet* transports = nullptr;
  const std::atomic<bool>* abort = nullptr;
  int64_t timeoutMs = 0;        // no progress for this long -> loomTimeout (0: never)
  int64_t spinNs = 0;           // how long to spin before sleeping when nothing moves
  WaitHistory* waitHistory = nullptr;  // the communicator's: shortens the spin while waits run long
  bool oversubscribed = false;  // yield the core while spinning
  CoreSharing* sharing = nullptr;  // the driving thread's: what to do about a peer on its core
  Tracer* tracer = nullptr;     // LOOM_TRACE_FILE, else null
  // The communicator's flight record: told whom a lasting wait is on, and that this rank's own wait
  // timed out (core/observe/flight_record.h).
  FlightRecord* flight = nullptr;
  std::vector<BoundPlan> plans;
};

// Runs one CommWork's plans in order, a non-blocking step at a time.
class PlanRunner {
 public:
  explicit PlanRunner(CommWork* work) : work_(work) {}
  // Starts over on `work`, keeping the capacity of its vectors (a thread reuses its runners).
  void rebind(CommWork* work) {
    work_ = work;
    planIndex_ = 0;
    flushWaitPeer_ = -1;
    connectingPeer_ = -1;
    started_ = false;
    done_ = false;
    planStartNs_ = 0;
  }
  // Moves every lane as far as it can go; *progressed is set when anything moved.
  Status advance(bool* progressed);
  bool done() const { return done_; }
  // loomRemoteError when a peer this runner waits on is known to have failed.
  Status checkBlockedPeers() const;
  // "lane 0 step 3/8 waits to receive from rank 2; ..." for timeout reports.
  std::string describeWaits() const;
  std::string describeCurrent() const;
  // The peer the first waiting lane waits on, -1 when none waits.
  int blockedPeer() const;
  // What this runner's waits may sleep on (network connections; memory peers ring the doorbell).
  void collectWaits(WaitList* waits) const;
  CommWork& work() const { return *work_; }

 private:
  enum class Wait : uint8_t { None, Send, Recv };
  struct LaneState {
    size_t next = 0;
    uint64_t readySinceNs = 0;  // when the lane's current step could first start (for traces)
    Wait waitingOn = Wait::None;
    int waitPeer = -1;  // kAnyPeer: a receive from any source that no message matched yet
    int anyPeer = -1;   // the rank a receive from any source took its first message from
  };
  // A direct send in flight reads [begin, end) of a buffer until its connection says it is done.
  struct DirectSend {
    const char* begin;
    const char* end;
    SendConnection* connection;
    uint64_t ticket;
    int peer;
  };
  // Starts the plan: Ok with started_ still false while a network peer it names is not connected yet
  // (connectingPeer_); the next pass tries again.
  Status startPlan();
  Status connectNetworkPeers(const BoundPlan& bp);
  Status tryStep(const BoundPlan& bp, const Lane& lane, const Step& s, LaneState& ls, bool* done);
  // -1 when [dst, dst + bytes) may be written now, else the peer of a direct send still reading it.
  int directSendReading(const char* dst, size_t bytes);


  CommWork* work_;
  size_t planIndex_ = 0;
  std::vector<LaneState> lanes_;
  std::vector<SendConnection*> sendsUsed_;  // flushed before a plan counts as complete
  std::vector<int> sendPeers_;              // the peer of each of sendsUsed_
  int flushWaitPeer_ = -1;                  // the first peer whose sends had not left at the last pass
  int connectingPeer_ = -1;                 // a network peer the plan waits to be connected with (not started)
  std::vector<DirectSend> directSends_;      // in flight; a step that writes what one reads waits for it
  bool started_ = false;
  bool done_ = false;
  uint64_t planStartNs_ = 0;
};

// What a thread does while the runners it drives cannot move: spin, then yield, then sleep. How long
// it spins follows the communicator's recent waits (core/run/wait_history.h), when it has a history.
class IdleWaiter {
 public:
  IdleWaiter(int64_t spinNs, bool yieldWhileSpinning, WaitHistory* history = nullptr)
      : spinNs_(spinNs), budgetNs_(spinNs), yield_(yieldWhileSpinning), history_(history) {}
  // Progress was made: the idle time restarts at the next tick (no clock read on the busy path). A
  // wait that idled is recorded, as long as it lasted up to the last clock read (after a sleep, its end).
  void progressed() {
    if (waited_ && history_) history_->record(idleNs());
    waited_ = false;
    fresh_ = true;
  }
  // New work after none: the idle time restarts, and the time without work is no wait for a peer.
  void restart() {
    waited_ = false;
    fresh_ = true;
  }
  // The time of this pass (one clock read per pass the driving loop makes while idle).
  void tick(uint64_t now) {
    now_ = now;
    if (fresh_) {
      lastProgress_ = now, fresh_ = false;
      budgetNs_ = history_ ? history_->spinBudget(spinNs_) : spinNs_;
      nextContentionProbeNs_ = 0;
      oversubscribed_ = false;
    }
  }
  // Since the last progress, as of the last tick.
  int64_t idleNs() const { return static_cast<int64_t>(now_ - lastProgress_); }
  // The memory peer the driving thread now waits on (-1: none or several) and what to do when it
  // shares this thread's core; a waiter without one just spins, yields and sleeps.
  void watchPeer(CoreSharing* sharing, int peer) {
    sharing_ = sharing;
    peer_ = peer;
  }
  // Waits a little. Before sleeping on `bell` it announces itself and calls retry(&progressed) once
  // more (see doorbell.h); whatever that pass returns is returned, with *progressed set.
  // `waits` names what network connections may be woken by, and how long they may be left alone.
  template <typename Retry>
  Status idle(Doorbell* bell, const WaitList& waits, bool memoryPeers, int64_t maxSleepUs, Retry&& retry,
              bool* progressed) {
    *progressed = false;
    waited_ = true;
    maxSleepUs = std::min(maxSleepUs, waits.maxSleepUs);
    if (spinning() && (!waits.bulk || !spinDelaysNetwork())) {
      pause();
      return Status::Ok();
    }
    if (!waits.fds.empty() || !bell) {
      sleepWithoutDoorbell(waits.fds, memoryPeers, maxSleepUs);
      return Status::Ok();
    }
    uint32_t seen = announceSleep(bell);
    Status st = retry(progressed);
    if (!st.ok() || *progressed) {
      cancelSleep(bell);
      return st;
    }
    sleepAnnounced(bell, seen, maxSleepUs);
    now_ = nowNs();  // one clock read per sleep: the wait's length reaches its end
    return Status::Ok();
  }

 private:
  // Whether this wait still spins (it is within its budget), and whether this pass yields.
  bool spinning();
  // The memory peer this thread waits on waits on this same core, and this thread did not move away.
  bool peerNeedsThisCore();
  // A wait on a large message through the network (WaitList::bulk) that has lasted a while, on a
  // machine with more runnable threads than cores (probed every so often): a spin would hold a core
  // that the sender or the kernel's network processing needs, and delay the very data it waits for.
  // Small messages keep their spin: a thread that sleeps waits for a core to be woken on.
  bool spinDelaysNetwork();
  // One pass of a spin.
  void pause();
  // Past the spin, where there is no doorbell to sleep on (network peers, or none).
  void sleepWithoutDoorbell(const std::vector<pollfd>& fds, bool memoryPeers, int64_t maxSleepUs);
  int64_t spinNs_;
  int64_t budgetNs_;  // this wait's spin: spinNs_, or brief while the history says waits run long
  bool yield_;
  WaitHistory* history_;
  bool waited_ = false;  // idle() ran since the last progress
  uint64_t lastProgress_ = 0;
  uint64_t now_ = 0;
  bool fresh_ = true;
  CoreSharing* sharing_ = nullptr;
  int peer_ = -1;
  bool yieldNow_ = false;  // this pass yields: more ranks than cores, or the peer found on this core
  int64_t nextContentionProbeNs_ = 0;  // the idle time at which this wait next reads the runnable count
  bool oversubscribed_ = false;        // what it read last
};

// The error of a runner that made no progress for timeoutMs. Network peers hear at once whom this rank
// waited on; then, for a short grace, it listens to its peers' notices: one that failed for a reason
// of its own is the root cause, else the rank that the others waited on and that said nothing (in a
// ring cut at one host every rank times out waiting on its neighbour, not on the lost rank).
Status stalledRunnerError(PlanRunner& runner, int64_t timeoutMs);
// `st` as it is, unless it is a network peer's "gave up waiting" notice (loomTimeout): then the same
// search for the rank that stopped.
Status explainPeerTimeout(PlanRunner& runner, const Status& st, int64_t timeoutMs);

// Runs every CommWork's plans to completion. On failure returns the first error, with the operation,
// the communicator and the step that failed in its message; *failedComm says which CommWork (or -1).
Status executeWork(std::span<CommWork> work, int* failedComm);

}  // namespace loom
