// What a lost peer does to the plan kernels' launches (plan_kernels.h, peerLost). A peer leaves in two
// ways that look alike from here: it crashed, and this rank's lanes wait on it for ever; or it finished
// its part of the last collective and exited, while this rank's kernel still runs a tail that needs no
// more of it (the last copy out of a slot it filled). Only the first is a failure. Lanes note whom they
// have long been waiting on (DeviceLaneStatus::waitingOn), which tells the two apart.
#include <chrono>

#include "device/memory_kind.h"
#include "device/plan_kernels.h"
#include "device/stream_capture.h"

namespace loom::device {

namespace {

// After a loss, a lane that waits on anyone this long after it fails its launch: the peer it waits on
// may itself wait on the lost one. Far above a collective's tail (a few steps), far below
// LOOM_TIMEOUT_MS.
constexpr auto kLostPeerGrace = std::chrono::milliseconds(2000);
// How often the settler looks at the lanes: while launches of before the loss run, and then, as long as
// CUDA graphs may be replayed, less often.
constexpr auto kSettleLook = std::chrono::milliseconds(5);
constexpr auto kCapturedLook = std::chrono::milliseconds(50);

struct LanesSeen {
  bool running = false;      // some launch has not ended
  bool waitOnLost = false;   // a lane notes a wait on the lost peer
  bool waitOnAnyone = false;
};

void look(const KernelLaunch& l, int lostPeer, LanesSeen* seen) {
  l.forEachWait([&](int peer) {
    seen->waitOnAnyone = true;
    if (peer == lostPeer) seen->waitOnLost = true;
  });
}

}  // namespace

void PlanKernels::peerLost(int peer, const Status& error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!peerBroken_.ok()) return;  // the first loss is the one reported
  peerBroken_ = error.withContext(facts_.describe);
  lostPeer_ = peer;
  lostAt_ = std::chrono::steady_clock::now();
  peerLostKnown_.store(true);
  if (settleLostPeerLocked() || settlerStopping_) return;
  settler_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!settlerStopping_ && !settleLostPeerLocked())
      settlerWake_.wait_for(lock, launches_.empty() ? kCapturedLook : kSettleLook);
  });
}

void PlanKernels::stopSettler() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    settlerStopping_ = true;
  }
  settlerWake_.notify_all();
  if (settler_.joinable()) settler_.join();
}

bool PlanKernels::settleLostPeerLocked() {
  if (failed_.load()) return true;
  const bool graceOver = std::chrono::steady_clock::now() - lostAt_ >= kLostPeerGrace;
  LanesSeen eager;
  if (!launches_.empty()) {
    DeviceScope scope(fifos_->device());
    RelaxedCaptureMode relaxed;  // event queries while some thread captures a graph (poll() says why)
    for (size_t i = 0; i < launches_.size(); ++i) {
      bool done = false;
      if (!launches_.at(i)->done.query(&done).ok() || done) continue;
      eager.running = true;
      look(*launches_.at(i), lostPeer_, &eager);
    }
  }
  if (eager.waitOnLost || (graceOver && eager.waitOnAnyone)) {
    if (destroying_)
      raiseAbort();  // the launches being waited for end now rather than at their timeout
    else
      fail(peerBroken_);
    return true;
  }
  // A CUDA graph's captured launches may be replayed at any time, unseen but for their lanes' notes:
  // a replay that waits on the lost peer (or on anyone, once the grace is over) is stopped at its wait
  // by the abort word, with the communicator not failed, and reapCapturedLocked then fails it, naming
  // the peer. A graph never replayed again fails nothing.
  bool watchCaptured = !captured_.empty() && !destroying_;
  if (watchCaptured) {
    LanesSeen replays;
    for (const std::shared_ptr<KernelLaunch>& l : captured_) look(*l, lostPeer_, &replays);
    if (replays.waitOnLost || (graceOver && replays.waitOnAnyone)) {
      raiseAbortWord();
      watchCaptured = false;
    }
  }
  return !eager.running && !watchCaptured;
}

void PlanKernels::checkPeersLocked() {
  if (peerBroken_.ok() || failed_.load()) return;
  reapLocked();
  if (!launches_.empty()) fail(peerBroken_);
}

}  // namespace loom::device
