#include "core/run/executor.h"

#include <sched.h>

#include <algorithm>
#include <cstring>

#include <fmt/ranges.h>

#include "base/clock.h"
#include "base/cpu_relax.h"
#include "base/thread_scratch.h"
#include "base/log.h"
#include "core/run/cpu_contention.h"
#include "kernels/cpu/stream_copy.h"
#include "transport/doorbell.h"

namespace loom {
namespace {

inline char* at(const BoundPlan& bp, const BufRef& ref) { return bp.buffers[ref.buffer] + ref.offset * bp.elemSize; }

// Copies a received (or just reduced) chunk into its destination.
inline void copyOut(const BoundPlan& bp, const BufRef& dst, const void* src, size_t bytes) {
  if (bp.streamOutput && dst.buffer == kRecvBuffer)
    streamCopy(at(bp, dst), src, bytes);
  else
    std::memcpy(at(bp, dst), src, bytes);
}

constexpr int64_t kShareProbeNs = 1'000;  // a wait this long looks whether the peer shares this core
constexpr uint64_t kHealthCheckNs = 100'000'000;  // how often a stalled wait looks for dead peers
// How long a timed-out rank listens for a peer's failure notice naming the root cause.
constexpr int64_t kRootCauseGraceMs = 500;
// A wait shorter than this with nothing to poll naps in ppoll rather than yielding the core.
constexpr int64_t kPollOnlyNapUs = 1000;
// A wait on a large network message spins this long before it asks whether the machine has a core
// for every runnable thread, then asks again this often while it still spins.
constexpr int64_t kNetworkSpinProbeNs = 20'000;
constexpr int64_t kNetworkSpinProbePeriodNs = 100'000;
// How long a wait for a network peer's connection offer (or a receive from any rank, to which one may
// come) sleeps at most: the offer arrives on the bootstrap's listener, which the wait does not poll.
constexpr int64_t kNetConnectNapUs = 500;

}  // namespace

Status PlanRunner::connectNetworkPeers(const BoundPlan& bp) {
  TransportSet& t = *work_->transports;
  connectingPeer_ = -1;
  for (const Lane& lane : bp.plan->lanes)
    for (const Step& s : lane.steps)
      for (const int peer : {s.sendPeer, s.recvPeer}) {
        if (peer < 0 || t.kind(peer) != TransportKind::Net) continue;
        bool up = false;
        LOOM_TRY(t.connectNet(peer, &up).withContext(describePlan(bp)));
        if (!up && connectingPeer_ < 0) connectingPeer_ = peer;
      }
  return Status::Ok();
}

Status PlanRunner::startPlan() {
  BoundPlan& bp = work_->plans[planIndex_];
  // Network peers are connected on first use: every one the plan names, before its first step (a
  // step that waited for a connection could hold up a peer that needs this rank's earlier steps).
  if (work_->transports->hasNetPeers()) {
    LOOM_TRY(connectNetworkPeers(bp));
    if (connectingPeer_ >= 0) return Status::Ok();  // not started: the next pass tries again
  }
  if (bp.stageFrom) {
    if (bp.stageScales)
      copyArray(bp.stagedSend.data(), bp.stageFrom, bp.stagedSend.size() / bp.elemSize, bp.dtype, bp.stageOp, true);
    else
      std::memcpy(bp.stagedSend.data(), bp.stageFrom, bp.stagedSend.size());
  }
  lanes_.assign(bp.plan->lanes.size(), LaneState{});
  sendsUsed_.clear();
  sendPeers_.clear();
  directSends_.clear();
  for (const Lane& lane : bp.plan->lanes)
    for (const Step& s : lane.steps)
      if (s.sendPeer >= 0) {
        SendConnection* c = work_->transports->send(s.sendPeer, static_cast<int>(lane.channel));
        if (std::find(sendsUsed_.begin(), sendsUsed_.end(), c) == sendsUsed_.end()) {
          sendsUsed_.push_back(c);
          sendPeers_.push_back(s.sendPeer);
          // A peer that already gave up (timeout, abort, error) fails this operation here, on every
          // rank, even when the messages it sent before giving up would let this rank finish.
          if (Status st = work_->transports->peerRecordedFailure(s.sendPeer); !st.ok())
            return st.withContext(describePlan(bp));
        }
      }
  started_ = true;
  if (work_->tracer) {
    planStartNs_ = nowNs();
    for (LaneState& ls : lanes_) ls.readySinceNs = planStartNs_;
  }
  return Status::Ok();
}

int PlanRunner::directSendReading(const char* dst, size_t bytes) {
  const char* end = dst + bytes;
  for (size_t i = 0; i < directSends_.size();) {
    const DirectSend& d = directSends_[i];
    if (d.begin >= end || dst >= d.end) {
      ++i;
    } else if (d.connection->sendDone(d.ticket)) {
      directSends_[i] = directSends_.back();
      directSends_.pop_back();
    } else {
      return d.peer;
    }
  }
  return -1;
}

Status PlanRunner::tryStep(const BoundPlan& bp, const Lane& lane, const Step& s, LaneState& ls, bool* done) {
  *done = false;
  TransportSet& t = *work_->transports;
  const size_t bytes = s.count * bp.elemSize;
  const int ch = static_cast<int>(lane.channel);
  auto waitFor = [&](Wait what, int peer) {
    ls.waitingOn = what;
    ls.waitPeer = peer;
    return Status::Ok();
  };
  // Every step but Send writes its destination: not while a direct send still reads those bytes.
  if (!directSends_.empty() && s.kind != StepKind::Send && s.dst.valid()) {
    const int reader = directSendReading(at(bp, s.dst), bytes);
    if (reader >= 0) return waitFor(Wait::Send, reader);
  }
  void* out = nullptr;
  const void* in = nullptr;
  SendConnection* sc = nullptr;
  RecvConnection* rc = nullptr;
  bool direct = false;  // the message leaves from the plan's buffers, not from a slot
  if (s.sendPeer >= 0) {
    sc = t.send(s.sendPeer, ch);
    // A result that is only forwarded (no destination) has nowhere to be computed but a slot.
    direct = sc->sendsDirect() && (s.kind == StepKind::Send || s.dst.valid());
    if (direct ? !sc->directSendReady() : (out = sc->trySendBuffer()) == nullptr) return waitFor(Wait::Send, s.sendPeer);
  }
  int recvPeer = s.recvPeer;
  if (recvPeer == kAnyPeer) {
    if (ls.anyPeer < 0) {
      // A network peer that sends first asks to connect (connections are made on first use): answered
      // here, its connection then joins the ones looked at.
      if (t.hasNetPeers()) LOOM_TRY(t.answerNetPeers());
      // The first rank whose next message on the point-to-point channel has arrived (nothing but sends
      // travel there: collectives use channels of their own); its later messages complete the
      // receive. Looking from the next rank up keeps low ranks from always winning.
      for (int k = 1; k < t.nranks() && ls.anyPeer < 0; ++k) {
        const int q = (t.rank() + k) % t.nranks();
        RecvConnection* from = t.recv(q, ch);
        if (!from) continue;  // a network peer not connected yet
        if (Status st = from->tryRecv(bytes, &in); !st.ok()) {
          if (t.peerClosed(q)) continue;  // a rank that finished and closed sends nothing more
          return st;
        }
        if (in) ls.anyPeer = q;
      }
      if (ls.anyPeer < 0) return waitFor(Wait::Recv, kAnyPeer);
      if (bp.anySource) *bp.anySource = ls.anyPeer;
    }
    recvPeer = ls.anyPeer;
  }
  if (recvPeer >= 0) {
    rc = t.recv(recvPeer, ch);
    LOOM_TRY(rc->tryRecv(bytes, &in));
    if (!in) return waitFor(Wait::Recv, recvPeer);
  }
  const char* sendFrom = nullptr;  // direct sends
  switch (s.kind) {
    case StepKind::Send:
      if (direct)
        sendFrom = at(bp, s.src);
      else
        std::memcpy(out, at(bp, s.src), bytes);
      break;
    case StepKind::Recv:
      copyOut(bp, s.dst, in, bytes);
      break;
    case StepKind::RecvReduce:
      reduceArrays(at(bp, s.dst), in, at(bp, s.src), s.count, bp.dtype, bp.op, s.finalize);
      break;
    case StepKind::RecvReduceSend:
      if (direct) {
        sendFrom = at(bp, s.dst);
        reduceArrays(at(bp, s.dst), in, at(bp, s.src), s.count, bp.dtype, bp.op, s.finalize);
      } else {
        reduceArrays(out, in, at(bp, s.src), s.count, bp.dtype, bp.op, s.finalize);
        if (s.dst.valid()) copyOut(bp, s.dst, out, bytes);
      }
      break;
    case StepKind::RecvCopySend:
      if (direct) {
        sendFrom = at(bp, s.dst);
        copyOut(bp, s.dst, in, bytes);
      } else {
        std::memcpy(out, in, bytes);
        if (s.dst.valid()) copyOut(bp, s.dst, in, bytes);
      }
      break;
    case StepKind::Reduce:  // local: dst holds the running total and comes first (one-shot's bitwise order)
      reduceArrays(at(bp, s.dst), at(bp, s.dst), at(bp, s.src), s.count, bp.dtype, bp.op, s.finalize);
      break;
    case StepKind::Meet:
    case StepKind::ReduceRanks:
      // The tuner offers peer-memory plans for device plan kernels only (PlanRequest::peerMemory).
      return internalError("{}: a peer-memory step ({}) on the host path; such plans run as device plan kernels",
                           describePlan(bp), stepKindName(s.kind));
    case StepKind::Copy: {
      char* dst = at(bp, s.dst);
      const char* src = at(bp, s.src);
      if (s.finalize)
        copyArray(dst, src, s.count, bp.dtype, bp.op, true);
      else if (dst != src)  // a copy onto itself is how in-place plans say "already there"
        std::memmove(dst, src, bytes);
      break;
    }
  }
  if (direct) {
    uint64_t ticket = 0;
    LOOM_TRY(sc->sendDirect(sendFrom, bytes, &ticket));
    directSends_.push_back(DirectSend{sendFrom, sendFrom + bytes, sc, ticket, s.sendPeer});
  } else if (sc) {
    LOOM_TRY(sc->commitSend(bytes));
  }
  if (rc) rc->releaseRecv();
  ls.waitingOn = Wait::None;
  *done = true;
  return Status::Ok();
}

Status PlanRunner::advance(bool* progressed) {
  // A network send reported complete may still need the provider to move it (UCX's TCP buffers), also
  // while this plan waits on memory peers only: the peer waiting for it may be what this plan waits on.
  if (!done_ && work_->transports->hasNetPeers()) work_->transports->progressNet();
  while (!done_) {
    if (planIndex_ >= work_->plans.size()) {
      done_ = true;
      *progressed = true;
      return Status::Ok();
    }
    if (!started_) {
      LOOM_TRY(startPlan());
      if (!started_) return Status::Ok();  // waits to connect to a network peer
    }
    const BoundPlan& bp = work_->plans[planIndex_];
    bool lanesDone = true;
    for (size_t l = 0; l < bp.plan->lanes.size(); ++l) {
      const Lane& lane = bp.plan->lanes[l];
      LaneState& ls = lanes_[l];
      while (ls.next < lane.steps.size()) {
        bool done = false;
        Status st = tryStep(bp, lane, lane.steps[ls.next], ls, &done);
        if (!st.ok())
          return st.withContext(fmt::format("{}: lane {} step {} ({})", describePlan(bp), l, ls.next,
                                            stepKindName(lane.steps[ls.next].kind)));
        if (!done) break;
        if (work_->tracer) {
          const Step& s = lane.steps[ls.next];
          uint64_t now = nowNs();
          const int recvPeer = s.recvPeer == kAnyPeer ? ls.anyPeer : s.recvPeer;
          work_->tracer->step(static_cast<int>(l), stepKindName(s.kind), s.sendPeer >= 0 ? s.sendPeer : recvPeer,
                              s.count * bp.elemSize, ls.readySinceNs, now);
          ls.readySinceNs = now;
        }
        ++ls.next;
        *progressed = true;
      }
      if (ls.next < lane.steps.size()) lanesDone = false;
    }
    bool drained = true;
    flushWaitPeer_ = -1;
    for (size_t i = 0; i < sendsUsed_.size(); ++i) {
      bool d = true;
      // The description is formatted only on failure: this runs for every operation.
      if (Status st = sendsUsed_[i]->flush(&d); !st.ok()) return st.withContext(describePlan(bp));
      if (!d && flushWaitPeer_ < 0) flushWaitPeer_ = sendPeers_[i];
      drained = drained && d;
    }
    if (!lanesDone || !drained) return Status::Ok();
    directSends_.clear();  // drained: every send of the plan is done
    if (work_->tracer) work_->tracer->operation(describePlan(bp), planStartNs_, nowNs());
    ++planIndex_;
    started_ = false;
    *progressed = true;
  }
  return Status::Ok();
}

std::string PlanRunner::describeCurrent() const {
  if (done_ || planIndex_ >= work_->plans.size()) return "an operation";
  return describePlan(work_->plans[planIndex_]);
}

std::string PlanRunner::describeWaits() const {
  std::string text;
  if (!done_ && !started_ && connectingPeer_ >= 0)
    return fmt::format("waits to connect to rank {} over the network (it has not answered)", connectingPeer_);
  if (done_ || !started_) return text;
  const BoundPlan& bp = work_->plans[planIndex_];
  for (size_t l = 0; l < lanes_.size(); ++l) {
    const LaneState& ls = lanes_[l];
    if (ls.next >= bp.plan->lanes[l].steps.size() || ls.waitingOn == Wait::None) continue;
    text += fmt::format("{}lane {} step {}/{} waits to {} {}", text.empty() ? "" : "; ", l, ls.next,
                        bp.plan->lanes[l].steps.size(), ls.waitingOn == Wait::Send ? "send to" : "receive from",
                        ls.waitPeer == kAnyPeer ? "any rank" : fmt::format("rank {}", ls.waitPeer));
  }
  if (text.empty() && flushWaitPeer_ >= 0)
    text = fmt::format("every step done, its sends to rank {} have not all left", flushWaitPeer_);
  return text;
}

namespace {

// A receive from any source waits on every peer. It fails when one of them failed (its failure may
// have cost the very message), or when none is left that could send: each closed its communicator or
// is gone. A peer that only finished its part and left is no failure while others remain.
Status anySourceHealth(const TransportSet& t) {
  int gone = 0;
  Status firstGone;
  std::vector<int> unconnected;  // network peers not connected yet (connections on first use)
  for (int q = 0; q < t.nranks(); ++q) {
    if (q == t.rank()) continue;
    Status st;
    if (t.peerClosed(q)) {
      st = errorStatus(loomRemoteError, "{} closed its communicator", t.describePeer(q));
    } else {
      const TransportSet::PeerNotice notice = t.peerNotice(q);
      if (notice.failed) return t.noticeError(q, notice);
      if (!t.netConnected(q)) {
        unconnected.push_back(q);
        continue;
      }
      st = t.peerHealth(q);
    }
    if (st.ok()) continue;
    ++gone;
    if (firstGone.ok()) firstGone = st;
  }
  // A peer without a connection says nothing when it leaves: only once every other one is gone are
  // they asked, one at a time until one is still there.
  if (gone + static_cast<int>(unconnected.size()) < t.nranks() - 1) return Status::Ok();
  for (int q : unconnected) {
    const Status st = t.probeNetPeer(q);
    if (st.ok()) return Status::Ok();
    ++gone;
    if (firstGone.ok()) firstGone = st;
  }
  return errorStatus(loomRemoteError, "no rank is left to send to this receive from any rank: {}{}", firstGone.message(),
                     gone > 1 ? fmt::format(", and the {} other(s) too", gone - 1) : "");
}

}  // namespace

Status PlanRunner::checkBlockedPeers() const {
  if (!done_ && !started_ && connectingPeer_ >= 0)
    return work_->transports->peerHealth(connectingPeer_).withContext(describeCurrent());
  if (done_ || !started_) return Status::Ok();
  // Only peers this rank waits on: one that finished its part and exited is no failure. A peer that
  // failed because of another carries that cause in its reason, so the dead rank is still named.
  for (const LaneState& ls : lanes_) {
    if (ls.waitingOn == Wait::None) continue;
    if (ls.waitPeer >= 0) {
      if (Status st = work_->transports->peerHealth(ls.waitPeer); !st.ok()) return st.withContext(describeCurrent());
    } else if (ls.waitPeer == kAnyPeer) {
      if (Status st = anySourceHealth(*work_->transports); !st.ok()) return st.withContext(describeCurrent());
    }
  }
  return Status::Ok();
}

void PlanRunner::collectWaits(WaitList* waits) const {
  if (done_ || !work_->transports->hasNetPeers()) return;
  if (!started_) {
    // The peer's offer comes through the bootstrap, on nothing this rank polls: look again soon.
    if (connectingPeer_ >= 0) waits->capSleep(kNetConnectNapUs);
    return;
  }
  const BoundPlan& bp = work_->plans[planIndex_];
  TransportSet& t = *work_->transports;
  for (size_t l = 0; l < lanes_.size(); ++l) {
    const LaneState& ls = lanes_[l];
    const int channel = static_cast<int>(bp.plan->lanes[l].channel);
    if (ls.waitingOn == Wait::Recv && ls.waitPeer == kAnyPeer) {
      for (int q = 0; q < t.nranks(); ++q)
        if (RecvConnection* from = q != t.rank() ? t.recv(q, channel) : nullptr) from->addWaits(waits);
      waits->capSleep(kNetConnectNapUs);  // a network peer not connected yet may ask to
    } else if (ls.waitingOn == Wait::Recv) {
      t.recv(ls.waitPeer, channel)->addWaits(waits);
    }
    if (ls.waitingOn == Wait::Send) t.send(ls.waitPeer, channel)->addWaits(waits);
  }
  for (SendConnection* c : sendsUsed_) c->addWaits(waits);
}

bool IdleWaiter::spinning() {
  if (idleNs() >= budgetNs_) return false;
  yieldNow_ = yield_ || peerNeedsThisCore();
  return true;
}

bool IdleWaiter::peerNeedsThisCore() {
  // A peer that has not answered within a microsecond may be waiting for this very core: then only
  // this thread leaving it lets the peer run, by moving to another core or by yielding.
  if (!sharing_ || peer_ < 0 || (idleNs() <= kShareProbeNs && !sharing_->sharing())) return false;
  if (!sharing_->sharesCpuWith(peer_, now_)) {
    sharing_->waitEndedApart();
    return false;
  }
  return !sharing_->giveWay(peer_, now_);
}

bool IdleWaiter::spinDelaysNetwork() {
  // Measured across two simulated hosts on 2 cores beside one busy process: a 64 MiB all_reduce moved
  // 0.14 GB/s while both ranks spun through their waits, 0.8 GB/s when they slept in poll at once
  // (docs/PERFORMANCE.md, "Across hosts on busy cores"); on idle cores the spin is what gives 1.6.
  const int64_t idle = idleNs();
  if (idle < kNetworkSpinProbeNs) return false;
  if (idle >= nextContentionProbeNs_) {
    oversubscribed_ = cpusOversubscribed();
    nextContentionProbeNs_ = idle + kNetworkSpinProbePeriodNs;
  }
  return oversubscribed_;
}

void IdleWaiter::pause() {
  // Spin (cheapest wake-up), then sleep. No sched_yield while the ranks have a core each: a kernel
  // whose scheduler is EEVDF (Linux 6.6 and later) puts a task that yields behind every other runnable
  // task's whole time slice, so a rank that yields beside a busy process waits milliseconds for a
  // peer that answered in microseconds (docs/PERFORMANCE.md, "Latency on busy cores").
  if (yieldNow_)
    sched_yield();  // more ranks than cores, or the peer on this one: the peer may be waiting for it
  else
    cpuRelax();
}

void IdleWaiter::sleepWithoutDoorbell(const std::vector<pollfd>& fds, bool memoryPeers, int64_t maxSleepUs) {
  if (!fds.empty() || maxSleepUs < kPollOnlyNapUs) {
    // Network connections: sleep in poll, briefly when memory peers may also deliver (they ring the
    // doorbell), or nap as long as the connections allow.
    std::vector<pollfd> copy = fds;
    const int64_t us = std::min<int64_t>(maxSleepUs, memoryPeers ? 1000 : maxSleepUs);
    const timespec ts{static_cast<time_t>(us / 1000000), static_cast<long>(us % 1000000) * 1000};
    ::ppoll(copy.data(), copy.size(), &ts, nullptr);
    now_ = nowNs();  // as after a doorbell sleep: the wait's length reaches its end
  } else {
    sched_yield();
  }
}

int PlanRunner::blockedPeer() const {
  if (!done_ && !started_) return connectingPeer_;
  if (done_ || !started_) return -1;
  for (const LaneState& ls : lanes_)
    if (ls.waitingOn != Wait::None && ls.waitPeer >= 0) return ls.waitPeer;
  return flushWaitPeer_;
}

namespace {

// The ranks that stopped, as this rank's peers' notices tell it: a rank that timed out names the rank
// it waited on; ranks that are waited on and said nothing (no notice, no recorded failure) stopped.
// A peer that failed for a reason of its own (killed, aborted, an error) is returned as `cause`.
struct WhoStopped {
  Status cause = Status::Ok();
  std::vector<int> silent;
  std::vector<int> gaveUp;  // peers that timed out
};

WhoStopped whoStopped(const TransportSet& t, int ownWait) {
  WhoStopped w;
  std::vector<int> waitedOn{ownWait};
  std::vector<bool> told(static_cast<size_t>(t.nranks()), false);
  for (int p = 0; p < t.nranks(); ++p) {
    if (p == t.rank()) continue;
    const TransportSet::PeerNotice n = t.peerNotice(p);
    if (!n.failed) continue;
    told[static_cast<size_t>(p)] = true;
    if (n.waitsOn < 0) {
      if (w.cause.ok()) w.cause = t.noticeError(p, n);
      continue;
    }
    w.gaveUp.push_back(p);
    waitedOn.push_back(n.waitsOn);
  }
  for (int q : waitedOn)
    if (q != t.rank() && q >= 0 && q < t.nranks() && !told[static_cast<size_t>(q)] &&
        std::find(w.silent.begin(), w.silent.end(), q) == w.silent.end())
      w.silent.push_back(q);
  return w;
}

// In a ring or a pipeline every rank stalls within moments of the others once one rank is lost, and
// each times out waiting on its neighbour, not on the lost rank. So a rank that gives up tells its
// peers whom it waited on (at once: they may be waiting on it), then listens for a while: a peer that
// failed for a reason of its own is the cause; otherwise the rank that the others wait on and that
// said nothing is the one that stopped. `first` is what this rank saw: its own timeout or a peer's
// "gave up waiting" notice.
Status explainStall(PlanRunner& runner, const Status& first, bool ownTimeout, int64_t timeoutMs) {
  TransportSet& t = *runner.work().transports;
  if (ownTimeout) t.markFailed(first.message(), true, runner.blockedPeer());
  const Deadline grace = Deadline::afterMs(std::min<int64_t>(kRootCauseGraceMs, timeoutMs / 4 + 1));
  WhoStopped w;
  for (;;) {
    w = whoStopped(t, runner.blockedPeer());
    if (!w.cause.ok()) return w.cause.withContext(runner.describeCurrent());
    if (grace.expired()) break;
    WaitList waits;
    runner.collectWaits(&waits);
    const timespec ts{0, 5'000'000};
    ::ppoll(waits.fds.data(), waits.fds.size(), &ts, nullptr);
  }
  // Only other ranks' notices make this more than this rank's own view (a cut-off rank hears nobody).
  if (w.silent.empty() || w.gaveUp.empty()) return first;
  std::string who;
  for (int r : w.silent) who += (who.empty() ? "" : ", ") + t.describePeer(r);
  return errorStatus(loomTimeout, "{}: {} stopped: ranks wait on it and it sent no failure notice (rank(s) {} gave "
                     "up waiting, LOOM_TIMEOUT_MS {} ms); this rank: {}",
                     runner.describeCurrent(), who, fmt::join(w.gaveUp, ", "), timeoutMs, first.message());
}

}  // namespace

Status explainPeerTimeout(PlanRunner& runner, const Status& st, int64_t timeoutMs) {
  if (st.code() != loomTimeout || !runner.work().transports->hasNetPeers()) return st;
  return explainStall(runner, st, false, timeoutMs);
}

Status stalledRunnerError(PlanRunner& runner, int64_t timeoutMs) {
  if (FlightRecord* flight = runner.work().flight) flight->markTimedOut();
  Status timeout = errorStatus(loomTimeout, "{}: no progress for {} ms (LOOM_TIMEOUT_MS); {}", runner.describeCurrent(),
                               timeoutMs, runner.describeWaits());
  if (!runner.work().transports->hasNetPeers()) return timeout;  // memory peers see the failure in this rank's segment at once
  return explainStall(runner, timeout, true, timeoutMs);
}

Status executeWork(std::span<CommWork> work, int* failedComm) {
  *failedComm = -1;
  // A thread's runners are kept from call to call: their vectors keep their capacity, so that a small
  // operation allocates nothing here (allocation was a fifth of an 8 B allreduce's time).
  ThreadScratch<PlanRunner> scratch;
  std::vector<PlanRunner>& pool = scratch.get();
  if (pool.size() < work.size()) pool.resize(work.size(), PlanRunner(nullptr));
  for (size_t i = 0; i < work.size(); ++i) pool[i].rebind(&work[i]);
  const std::span<PlanRunner> runners(pool.data(), work.size());
  int64_t spinNs = 0;
  bool yieldWhileSpinning = false, memoryPeers = false;
  for (CommWork& w : work) {
    spinNs = std::max(spinNs, w.spinNs);
    yieldWhileSpinning = yieldWhileSpinning || w.oversubscribed;
    memoryPeers = memoryPeers || w.transports->hasMemoryPeers();
  }
  // One communicator's waits teach its history; a thread driving several learns nothing from them.
  IdleWaiter waiter(spinNs, yieldWhileSpinning, work.size() == 1 ? work[0].waitHistory : nullptr);
  waiter.restart();
  uint64_t lastHealthCheck = nowNs();
  WaitList waits;
  Doorbell* bell = work.empty() ? nullptr : work[0].transports->bell();
  bool allDone = false;
  auto pass = [&](bool* progressed) -> Status {
    allDone = true;
    for (size_t i = 0; i < runners.size(); ++i) {
      Status st = runners[i].advance(progressed);
      st = explainPeerTimeout(runners[i], st, work[i].timeoutMs);
      if (!st.ok()) {
        *failedComm = static_cast<int>(i);
        return st;
      }
      allDone = allDone && runners[i].done();
    }
    return Status::Ok();
  };
  for (;;) {
    for (size_t i = 0; i < runners.size(); ++i)
      if (work[i].abort && work[i].abort->load(std::memory_order_relaxed)) {
        *failedComm = static_cast<int>(i);
        return errorStatus(loomRemoteError, "communicator aborted during {}", runners[i].describeCurrent());
      }
    bool progressed = false;
    LOOM_TRY(pass(&progressed));
    if (progressed) waiter.progressed();  // before returning: the pass that completes ends a wait too
    if (allDone) return Status::Ok();
    if (progressed) continue;
    const uint64_t now = nowNs();
    waiter.tick(now);
    if (now - lastHealthCheck > kHealthCheckNs) {
      lastHealthCheck = now;
      for (size_t i = 0; i < runners.size(); ++i) {
        if (work[i].flight) work[i].flight->waitingOn(runners[i].blockedPeer());
        Status st = runners[i].checkBlockedPeers();
        int64_t timeoutMs = work[i].timeoutMs;
        st = explainPeerTimeout(runners[i], st, timeoutMs);
        if (st.ok() && !runners[i].done() && timeoutMs > 0 && waiter.idleNs() > timeoutMs * 1000000)
          st = stalledRunnerError(runners[i], timeoutMs);
        if (!st.ok()) {
          *failedComm = static_cast<int>(i);
          return st;
        }
      }
    }
    waits.clear();
    for (const PlanRunner& r : runners) r.collectWaits(&waits);
    waiter.watchPeer(work.size() == 1 ? work[0].sharing : nullptr, work.size() == 1 ? runners[0].blockedPeer() : -1);
    // One thread driving several communicators cannot sleep on all their doorbells: nap briefly.
    LOOM_TRY(waiter.idle(bell, waits, memoryPeers || work.size() > 1, work.size() > 1 ? 200 : 100000, pass, &progressed));
    if (progressed) waiter.progressed();
    if (allDone) return Status::Ok();
  }
}

}  // namespace loom
