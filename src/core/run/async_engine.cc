#include "core/run/async_engine.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>

#include "base/clock.h"
#include "base/cpu_relax.h"
#include "base/log.h"
#include "core/communicator.h"

namespace loom {

namespace {

// How often queued work that waits on a gate is polled while nothing else moves.
constexpr int64_t kGatePollUs = 50;
// How long a submitting thread may drive its own operation (see submit): an 8 B allreduce between
// two processes takes about 1 us, a few KiB some 10 us.
constexpr uint64_t kCallerStartNs = 50'000;

std::vector<std::pair<int, bool>> linksOf(const CommWork& work) {
  std::vector<std::pair<int, bool>> links;
  for (const BoundPlan& bp : work.plans)
    for (const Lane& lane : bp.plan->lanes)
      for (const Step& s : lane.steps) {
        if (s.sendPeer >= 0) links.emplace_back(s.sendPeer, true);
        if (s.recvPeer >= 0) links.emplace_back(s.recvPeer, false);
        // A receive from any source may take the next message of every peer: it waits for every
        // earlier receive, and every later one waits for it.
        if (s.recvPeer == kAnyPeer)
          for (int q = 0; q < work.transports->nranks(); ++q)
            if (q != work.transports->rank()) links.emplace_back(q, false);
      }
  std::sort(links.begin(), links.end());
  links.erase(std::unique(links.begin(), links.end()), links.end());
  return links;
}

bool intersects(const std::vector<std::pair<int, bool>>& a, const std::vector<std::pair<int, bool>>& b) {
  for (const auto& x : a)
    if (std::binary_search(b.begin(), b.end(), x)) return true;
  return false;
}

}  // namespace

AsyncEngine::AsyncEngine(loomComm* comm, uint64_t completedUpTo)
    : comm_(comm), completedUpTo_(completedUpTo), lastSubmitted_(completedUpTo), thread_([this] { run(); }) {}

AsyncEngine::~AsyncEngine() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  ringDoorbell(comm_->transports->bell());
  thread_.join();
}

void AsyncEngine::submit(uint64_t id, CommWork work, bool collective, std::vector<std::shared_ptr<device::OperationGate>> gates) {
  auto task = std::make_unique<Task>();
  task->id = id;
  task->collective = collective;
  if (!collective) task->links = linksOf(work);
  task->work = std::move(work);
  task->gates = std::move(gates);
  task->queuedNs = nowNs();
  for (const auto& gate : task->gates) gate->claim();
  bool onCaller = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    lastSubmitted_ = std::max(lastSubmitted_, id);
    if (!failure_.ok()) {
      completeLocked(id);  // the failure is reported by wait()
      finishTask(*task, failure_);
      return;
    }
    onCaller = task->gates.empty() && pending_.empty() && active_.empty() && !handedOver_ && !callerDriving_;
    if (onCaller) {
      callerDriving_ = true;
    } else {
      pending_.push_back(std::move(task));
      submissions_.fetch_add(1, std::memory_order_seq_cst);
    }
  }
  if (onCaller && startOnCaller(task)) return;
  changed_.notify_all();
  ringDoorbell(comm_->transports->bell());  // the progress thread may be asleep on it
}

bool AsyncEngine::startOnCaller(std::unique_ptr<Task>& task) {
  task->runner = std::make_unique<PlanRunner>(&task->work);
  const uint64_t until = nowNs() + kCallerStartNs;
  Status st;
  for (;;) {
    bool progressed = false;
    st = task->runner->advance(&progressed);
    if (!st.ok() || task->runner->done() || nowNs() > until) break;
    if (progressed) continue;
    if (comm_->oversubscribed)
      sched_yield();  // the peer may need this core
    else
      cpuRelax();
  }
  if (!st.ok()) {
    // Nothing else runs on this communicator now: this thread may tell its network peers.
    st = explainPeerTimeout(*task->runner, st, task->work.timeoutMs);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      callerDriving_ = false;
      handedOver_ = std::move(task);  // failLocked completes it with the error
    }
    failCommunicator(st);
    return true;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  callerDriving_ = false;
  if (!task->runner->done()) {
    // Not into active_: the progress thread may still be reading it outside the lock (its last task
    // has just been erased); it takes the task from here under the lock.
    handedOver_ = std::move(task);
    submissions_.fetch_add(1, std::memory_order_seq_cst);
    return false;
  }
  finishTask(*task, Status::Ok());
  completeLocked(task->id);
  changed_.notify_all();  // waiters on this operation, and the progress thread
  // Work queued behind this one while it ran: the progress thread admits it now.
  if (!pending_.empty()) {
    submissions_.fetch_add(1, std::memory_order_seq_cst);
    ringDoorbell(comm_->transports->bell());
  }
  return true;
}

Status AsyncEngine::wait(uint64_t id, int64_t timeoutMs) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto ready = [&] { return completedUpTo_ >= id || !failure_.ok(); };
  if (timeoutMs < 0) {
    changed_.wait(lock, ready);
  } else if (!changed_.wait_for(lock, std::chrono::milliseconds(timeoutMs), ready)) {
    return Status(loomInProgress, fmt::format("operation {} is still in progress", id));
  }
  return failure_;
}

void AsyncEngine::completeLocked(uint64_t id) {
  doneOutOfOrder_.insert(id);
  while (!doneOutOfOrder_.empty() && *doneOutOfOrder_.begin() == completedUpTo_ + 1) {
    doneOutOfOrder_.erase(doneOutOfOrder_.begin());
    ++completedUpTo_;
  }
  comm_->flight.completedUpTo(completedUpTo_);
}

void AsyncEngine::finishTask(Task& task, const Status& outcome) {
  for (const auto& gate : task.gates) gate->finish(outcome);
}

// A task's gates are polled only while it could otherwise start (at most a few per pass). A gate's
// error is kept in *broken (the caller fails the communicator with it).
bool AsyncEngine::gatesReadyLocked(Task& task, Status* broken) {
  for (const auto& gate : task.gates) {
    bool ready = false;
    Status st = gate->ready(&ready);
    if (!st.ok()) {
      *broken = st.withContext(fmt::format("{} operation {}", comm_->describe(), task.id));
      return false;
    }
    if (!ready) return false;
  }
  return true;
}

bool AsyncEngine::waitsOnGatesLocked() const {
  return std::any_of(pending_.begin(), pending_.end(), [](const auto& t) { return !t->gates.empty(); });
}

void AsyncEngine::failLocked(const Status& error) {
  if (failure_.ok()) failure_ = error;
  if (handedOver_) {
    completeLocked(handedOver_->id);
    finishTask(*handedOver_, failure_);
    handedOver_.reset();
  }
  for (auto& t : active_) {
    completeLocked(t->id);
    finishTask(*t, failure_);
  }
  for (auto& t : pending_) {
    completeLocked(t->id);
    finishTask(*t, failure_);
  }
  // A submitting thread fails the communicator only while active_ is empty (its operation ran alone):
  // it must not write the vector, which the progress thread may be reading outside the lock.
  if (!active_.empty()) active_.clear();
  pending_.clear();
}

// Starts what may start: collectives only at the head of an idle queue, point-to-point tasks when
// none of their links is used by an active task or by an earlier task still waiting; either only
// once its gates are ready. Stops at a broken gate, with its error in *broken.
void AsyncEngine::admitLocked(Status* broken) {
  bool activeCollective = std::any_of(active_.begin(), active_.end(), [](const auto& t) { return t->collective; });
  if (activeCollective) return;
  std::vector<std::pair<int, bool>> busy;
  for (const auto& t : active_) busy.insert(busy.end(), t->links.begin(), t->links.end());
  std::sort(busy.begin(), busy.end());
  for (auto it = pending_.begin(); it != pending_.end();) {
    Task& t = **it;
    if (t.collective) {
      if (it == pending_.begin() && active_.empty() && gatesReadyLocked(t, broken)) {
        t.runner = std::make_unique<PlanRunner>(&t.work);
        active_.push_back(std::move(*it));
        pending_.erase(it);
      }
      return;  // nothing passes a collective
    }
    const bool startable = !intersects(t.links, busy) && gatesReadyLocked(t, broken);
    if (!broken->ok()) return;
    if (startable) {
      t.runner = std::make_unique<PlanRunner>(&t.work);
      busy.insert(busy.end(), t.links.begin(), t.links.end());
      std::sort(busy.begin(), busy.end());
      active_.push_back(std::move(*it));
      it = pending_.erase(it);
    } else {
      busy.insert(busy.end(), t.links.begin(), t.links.end());  // keeps later tasks behind this one
      std::sort(busy.begin(), busy.end());
      ++it;
    }
  }
}

Status AsyncEngine::progressActive(bool* progressed) {
  for (size_t i = 0; i < active_.size();) {
    if (Status st = active_[i]->runner->advance(progressed); !st.ok())
      return explainPeerTimeout(*active_[i]->runner, st, active_[i]->work.timeoutMs);
    if (active_[i]->runner->done()) {
      finishTask(*active_[i], Status::Ok());
      std::lock_guard<std::mutex> lock(mutex_);
      completeLocked(active_[i]->id);
      active_.erase(active_.begin() + static_cast<long>(i));
      changed_.notify_all();
      *progressed = true;
    } else {
      ++i;
    }
  }
  return Status::Ok();
}

// The communicator is marked failed (peers told, async error set) before the queue fails, so whoever
// sees an operation or a gate end with the error also sees the communicator's.
void AsyncEngine::failCommunicator(const Status& error) {
  markCommFailed(comm_, error, true);
  {
    std::lock_guard<std::mutex> lock(comm_->errorMutex);
    comm_->lastError = error.message();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  failLocked(error);
  changed_.notify_all();
}

void AsyncEngine::run() {
  pthread_setname_np(pthread_self(), "loom-progress");  // what ps, top and gdb show
  comm_->numaBinding.bindThisThread();
  TransportSet& transports = *comm_->transports;
  IdleWaiter waiter(comm_->spinNs, comm_->oversubscribed, comm_->waitHistory.get());
  CoreSharing sharing(comm_->transports.get(), comm_->mayMoveThreads);
  waiter.restart();
  uint64_t lastHealthCheck = nowNs();
  WaitList waits;
  for (;;) {
    uint64_t seenSubmissions = 0;
    bool gated = false;  // queued work waits on a gate: poll it rather than sleep long
    Status gateFailure;  // a gate broke or timed out in this pass: the communicator is broken
    {
      std::unique_lock<std::mutex> lock(mutex_);
      seenSubmissions = submissions_.load();
      changed_.wait(lock, [&] {
        return stop_ || ((!pending_.empty() || !active_.empty() || handedOver_) && !callerDriving_);
      });
      if (comm_->aborted.load() && !callerDriving_)
        failLocked(Status(loomRemoteError, comm_->describe() + " was aborted"));
      if (callerDriving_) continue;  // a submitting thread runs its operation (submit); it wakes us after
      const bool wasIdle = active_.empty();
      // Started by its caller while nothing else ran: it is the oldest operation, so it goes first.
      if (handedOver_) active_.insert(active_.begin(), std::move(handedOver_));
      admitLocked(&gateFailure);
      if (wasIdle && !active_.empty()) waiter.restart();  // new work: spin before sleeping again
      if (gateFailure.ok()) {
        if (active_.empty() && pending_.empty()) {
          if (stop_) return;
          continue;
        }
        gated = waitsOnGatesLocked();
        if (active_.empty()) {
          // Only gated work is queued: its inputs are still on their way (a CUDA stream copies them).
          const Task& head = *pending_.front();
          if (head.work.timeoutMs <= 0 || nowNs() - head.queuedNs <= uint64_t(head.work.timeoutMs) * 1000000) {
            changed_.wait_for(lock, std::chrono::microseconds(kGatePollUs));
            continue;
          }
          gateFailure = errorStatus(loomTimeout, "{} operation {}: its inputs were not ready after {} ms (LOOM_TIMEOUT_MS); "
                                    "is its CUDA stream blocked?", comm_->describe(), head.id, head.work.timeoutMs);
        }
      }
    }
    if (!gateFailure.ok()) {
      failCommunicator(gateFailure);
      continue;
    }
    bool progressed = false;
    Status st = progressActive(&progressed);
    const uint64_t now = progressed ? 0 : nowNs();
    if (!progressed) waiter.tick(now);
    if (st.ok() && !progressed && now - lastHealthCheck > 100'000'000ull) {
      lastHealthCheck = now;
      for (const auto& t : active_) {
        if (!st.ok()) break;
        if (t->work.flight) t->work.flight->waitingOn(t->runner->blockedPeer());
        st = explainPeerTimeout(*t->runner, t->runner->checkBlockedPeers(), t->work.timeoutMs);
        if (st.ok() && t->work.timeoutMs > 0 && waiter.idleNs() > t->work.timeoutMs * 1000000)
          st = stalledRunnerError(*t->runner, t->work.timeoutMs);
      }
    }
    if (!st.ok()) {
      failCommunicator(st);
      continue;
    }
    if (progressed) {
      waiter.progressed();
      continue;
    }
    waits.clear();
    for (const auto& t : active_) t->runner->collectWaits(&waits);
    waiter.watchPeer(&sharing, active_.size() == 1 ? active_.front()->runner->blockedPeer() : -1);
    // A submit rings the doorbell too, so new work also ends the sleep.
    Status idleStatus = waiter.idle(transports.bell(), waits, transports.hasMemoryPeers(), gated ? kGatePollUs : 100000,
                                    [&](bool* p) {
                                      LOOM_TRY(progressActive(p));
                                      if (submissions_.load() != seenSubmissions) *p = true;
                                      return Status::Ok();
                                    },
                                    &progressed);
    if (progressed) waiter.progressed();
    if (!idleStatus.ok()) {
      markCommFailed(comm_, idleStatus, true);
      std::lock_guard<std::mutex> lock(mutex_);
      failLocked(idleStatus);
      changed_.notify_all();
    }
  }
}

}  // namespace loom
