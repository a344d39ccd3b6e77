#include "core/executor.h"

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <cstring>

#include "base/clock.h"
#include "base/env.h"
#include "base/log.h"
#include "transport/doorbell.h"

namespace loom {
namespace {

enum class Wait : uint8_t { None, Send, Recv };

struct LaneState {
  size_t next = 0;          // index of the next step to run
  Wait waitingOn = Wait::None;
  int waitPeer = -1;
};

// Progress state of one CommWork.
struct Runner {
  CommWork* work = nullptr;
  size_t planIndex = 0;
  std::vector<LaneState> lanes;
  std::vector<SendConnection*> sendsUsed;  // flushed before a plan counts as complete
  bool started = false;
  bool done = false;
};

inline char* at(const BoundPlan& bp, const BufRef& ref) {
  return bp.buffers[ref.buffer] + ref.offset * bp.elemSize;
}

inline void cpuRelax() { __builtin_ia32_pause(); }

constexpr int64_t kPureSpinNs = 30'000;  // past this, waiting ranks yield while they spin

void startPlan(Runner& r) {
  const BoundPlan& bp = r.work->plans[r.planIndex];
  r.lanes.assign(bp.plan->lanes.size(), LaneState{});
  r.sendsUsed.clear();
  for (const Lane& lane : bp.plan->lanes)
    for (const Step& s : lane.steps)
      if (s.sendPeer >= 0) {
        SendConnection* c = r.work->transports->send(s.sendPeer, static_cast<int>(lane.channel));
        if (std::find(r.sendsUsed.begin(), r.sendsUsed.end(), c) == r.sendsUsed.end()) r.sendsUsed.push_back(c);
      }
  r.started = true;
}

// Tries one step; *done tells whether it completed. Never blocks.
Status tryStep(const BoundPlan& bp, TransportSet& t, const Lane& lane, const Step& s, LaneState& ls, bool* done) {
  *done = false;
  const size_t bytes = s.count * bp.elemSize;
  const int ch = static_cast<int>(lane.channel);
  void* out = nullptr;
  const void* in = nullptr;
  SendConnection* sc = nullptr;
  RecvConnection* rc = nullptr;
  if (s.sendPeer >= 0) {
    sc = t.send(s.sendPeer, ch);
    out = sc->trySendBuffer();
    if (!out) {
      ls.waitingOn = Wait::Send;
      ls.waitPeer = s.sendPeer;
      return Status::Ok();
    }
  }
  if (s.recvPeer >= 0) {
    rc = t.recv(s.recvPeer, ch);
    LOOM_TRY(rc->tryRecv(bytes, &in));
    if (!in) {
      ls.waitingOn = Wait::Recv;
      ls.waitPeer = s.recvPeer;
      return Status::Ok();
    }
  }
  switch (s.kind) {
    case StepKind::Send:
      std::memcpy(out, at(bp, s.src), bytes);
      break;
    case StepKind::Recv:
      std::memcpy(at(bp, s.dst), in, bytes);
      break;
    case StepKind::RecvReduce:
      reduceArrays(at(bp, s.dst), in, at(bp, s.src), s.count, bp.dtype, bp.op, s.finalize);
      break;
    case StepKind::RecvReduceSend:
      reduceArrays(out, in, at(bp, s.src), s.count, bp.dtype, bp.op, s.finalize);
      if (s.dst.valid()) std::memcpy(at(bp, s.dst), out, bytes);
      break;
    case StepKind::RecvCopySend:
      std::memcpy(out, in, bytes);
      if (s.dst.valid()) std::memcpy(at(bp, s.dst), in, bytes);
      break;
    case StepKind::Copy: {
      char* dst = at(bp, s.dst);
      const char* src = at(bp, s.src);
      if (s.finalize)
        copyArray(dst, src, s.count, bp.dtype, bp.op, true);
      else if (dst != src)
        std::memmove(dst, src, bytes);
      break;
    }
  }
  if (sc) LOOM_TRY(sc->commitSend(bytes));
  if (rc) rc->releaseRecv();
  ls.waitingOn = Wait::None;
  *done = true;
  return Status::Ok();
}

// Runs as far as possible; *progressed when anything moved.
Status advance(Runner& r, bool* progressed) {
  while (!r.done) {
    if (r.planIndex >= r.work->plans.size()) {
      r.done = true;
      *progressed = true;
      return Status::Ok();
    }
    if (!r.started) startPlan(r);
    const BoundPlan& bp = r.work->plans[r.planIndex];
    TransportSet& t = *r.work->transports;
    bool lanesDone = true;
    for (size_t l = 0; l < bp.plan->lanes.size(); ++l) {
      const Lane& lane = bp.plan->lanes[l];
      LaneState& ls = r.lanes[l];
      while (ls.next < lane.steps.size()) {
        bool done = false;
        Status st = tryStep(bp, t, lane, lane.steps[ls.next], ls, &done);
        if (!st.ok())
          return st.withContext(fmt::format("{}: lane {} step {} ({})", describePlan(bp), l, ls.next,
                                            stepKindName(lane.steps[ls.next].kind)));
        if (!done) break;
        ++ls.next;
        *progressed = true;
      }
      if (ls.next < lane.steps.size()) lanesDone = false;
    }
    bool drained = true;
    for (SendConnection* c : r.sendsUsed) {
      bool d = true;
      LOOM_TRY(c->flush(&d).withContext(describePlan(bp)));
      drained = drained && d;
    }
    if (!lanesDone || !drained) return Status::Ok();
    ++r.planIndex;
    r.started = false;
    *progressed = true;
  }
  return Status::Ok();
}

// What every blocked lane waits for, for timeouts and the health check.
std::string describeWaits(const Runner& r) {
  std::string text;
  if (r.done || !r.started) return text;
  const BoundPlan& bp = r.work->plans[r.planIndex];
  for (size_t l = 0; l < r.lanes.size(); ++l) {
    const LaneState& ls = r.lanes[l];
    if (ls.next >= bp.plan->lanes[l].steps.size() || ls.waitingOn == Wait::None) continue;
    text += fmt::format("{}lane {} step {}/{} waits to {} rank {}", text.empty() ? "" : "; ", l, ls.next,
                        bp.plan->lanes[l].steps.size(), ls.waitingOn == Wait::Send ? "send to" : "receive from",
                        ls.waitPeer);
  }
  return text;
}

Status checkBlocked(const Runner& r) {
  if (r.done || !r.started) return Status::Ok();
  const BoundPlan& bp = r.work->plans[r.planIndex];
  for (const LaneState& ls : r.lanes)
    if (ls.waitingOn != Wait::None && ls.waitPeer >= 0)
      LOOM_TRY(r.work->transports->peerHealth(ls.waitPeer).withContext(describePlan(bp)));
  return Status::Ok();
}

void collectPollFds(const Runner& r, std::vector<pollfd>* fds) {
  if (r.done || !r.started || !r.work->transports->hasSocketPeers()) return;
  const BoundPlan& bp = r.work->plans[r.planIndex];
  TransportSet& t = *r.work->transports;
  for (size_t l = 0; l < r.lanes.size(); ++l) {
    const LaneState& ls = r.lanes[l];
    if (ls.waitingOn != Wait::Recv) continue;
    int fd = t.recv(ls.waitPeer, static_cast<int>(bp.plan->lanes[l].channel))->pollFd();
    if (fd >= 0) fds->push_back(pollfd{fd, POLLIN, 0});
  }
  for (SendConnection* c : r.sendsUsed)
    if (c->pollFd() >= 0) fds->push_back(pollfd{c->pollFd(), POLLOUT, 0});
}

}  // namespace

Status executeWork(std::vector<CommWork>& work, int* failedComm) {
  *failedComm = -1;
  std::vector<Runner> runners(work.size());
  for (size_t i = 0; i < work.size(); ++i) runners[i].work = &work[i];
  int64_t spinNs = 0;
  bool yieldWhileSpinning = false;
  for (const CommWork& w : work) {
    spinNs = std::max(spinNs, w.spinNs);
    yieldWhileSpinning = yieldWhileSpinning || w.oversubscribed;
  }
  uint64_t lastProgress = nowNs(), lastHealthCheck = lastProgress;
  std::vector<pollfd> fds;
  for (;;) {
    Doorbell* bell = work.empty() ? nullptr : work[0].transports->bell();
    uint32_t seen = bell ? bell->seq.load(std::memory_order_acquire) : 0;
    bool progressed = false, allDone = true;
    for (size_t i = 0; i < runners.size(); ++i) {
      if (work[i].abort && work[i].abort->load(std::memory_order_relaxed)) {
        *failedComm = static_cast<int>(i);
        return errorStatus(loomRemoteError, "communicator aborted during {}",
                           runners[i].done ? "an operation" : describePlan(work[i].plans[runners[i].planIndex]));
      }
      Status st = advance(runners[i], &progressed);
      if (!st.ok()) {
        *failedComm = static_cast<int>(i);
        return st;
      }
      allDone = allDone && runners[i].done;
    }
    if (allDone) return Status::Ok();
    uint64_t now = nowNs();
    if (progressed) {
      lastProgress = now;
      continue;
    }
    // Spin (cheapest wake-up), then yield (lets whatever else is runnable have the core), then sleep.
    const int64_t idleNs = static_cast<int64_t>(now - lastProgress);
    if (idleNs < spinNs) {
      if (yieldWhileSpinning || idleNs > kPureSpinNs)
        sched_yield();
      else
        cpuRelax();
      continue;
    }
    // Nothing moved for a while: check for dead peers and timeouts, then sleep.
    if (now - lastHealthCheck > 100'000'000ull) {
      lastHealthCheck = now;
      for (size_t i = 0; i < runners.size(); ++i) {
        Status st = checkBlocked(runners[i]);
        if (!st.ok()) {
          *failedComm = static_cast<int>(i);
          return st;
        }
        int64_t timeoutMs = work[i].timeoutMs;
        if (!runners[i].done && timeoutMs > 0 && now - lastProgress > static_cast<uint64_t>(timeoutMs) * 1000000ull) {
          *failedComm = static_cast<int>(i);
          return errorStatus(loomTimeout, "{}: no progress for {} ms (LOOM_TIMEOUT_MS); {}",
                             describePlan(work[i].plans[runners[i].planIndex]), timeoutMs, describeWaits(runners[i]));
        }
      }
    }
    fds.clear();
    for (const Runner& r : runners) collectPollFds(r, &fds);
    bool memoryPeers = false;
    for (const CommWork& w : work) memoryPeers = memoryPeers || w.transports->hasMemoryPeers();
    // Sleep: on the doorbell when only memory peers can wake us, else on the sockets with a short
    // timeout so memory peers and other communicators are still looked at often.
    if (!fds.empty()) {
      ::poll(fds.data(), fds.size(), memoryPeers || work.size() > 1 ? 1 : 100);
    } else if (bell) {
      int64_t us = work.size() > 1 ? 200 : 100000;
      sleepOnDoorbell(bell, seen, us);
    } else {
      sched_yield();
    }
  }
}

}  // namespace loom
