// The progress thread of a nonblocking communicator (config.blocking = 0): operations are queued by
// the calling thread (already validated and planned) and run here. Collectives start in call order,
// each after everything before it finished; point-to-point groups only wait for earlier operations
// that use one of the same (peer, direction) pairs, so a send never waits for a later receive.
// An operation with gates (device/operation_gate.h: device buffers staged on a CUDA stream) also waits
// until its gates are ready, and tells them when it ended, whether it completed or failed.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "core/run/executor.h"
#include "device/operation_gate.h"

struct loomComm;

namespace loom {

class AsyncEngine {
 public:
  // Operations up to `completedUpTo` ran before the engine existed (on their callers): they count as
  // complete, or wait() would wait for them forever.
  AsyncEngine(loomComm* comm, uint64_t completedUpTo);
  ~AsyncEngine();  // finishes queued work (or gives up when the communicator fails), then stops

  // `work` holds the plans of operation `id`; `collective` orders it behind everything earlier. It
  // starts once every gate is ready; the engine finishes the gates (it claims them here).
  // An operation without gates that nothing is queued or running ahead of starts on the calling
  // thread: it runs there for up to kCallerStartNs, which completes a small one without handing it
  // to the progress thread and back (two wake-ups, tens of microseconds), and whatever is left goes
  // to the progress thread. So submit may take that long; it never waits on a peer longer.
  void submit(uint64_t id, CommWork work, bool collective, std::vector<std::shared_ptr<device::OperationGate>> gates = {});
  // Waits until every operation up to `id` completed: loomSuccess, loomInProgress when timeoutMs
  // passed first (0: test, <0: forever), or the error that broke the communicator.
  Status wait(uint64_t id, int64_t timeoutMs);

 private:
  struct Task {
    uint64_t id = 0;
    bool collective = false;
    std::vector<std::pair<int, bool>> links;  // (peer, isSend) pairs a point-to-point task uses
    CommWork work;
    std::unique_ptr<PlanRunner> runner;
    std::vector<std::shared_ptr<device::OperationGate>> gates;
    uint64_t queuedNs = 0;
  };
  void run();
  void admitLocked(Status* broken);
  bool gatesReadyLocked(Task& task, Status* broken);
  bool waitsOnGatesLocked() const;
  void finishTask(Task& task, const Status& outcome);
  void completeLocked(uint64_t id);
  void failLocked(const Status& error);
  void failCommunicator(const Status& error);
  Status progressActive(bool* progressed);
  // The caller's start (see submit): true when the task completed or failed on the calling thread;
  // false leaves it in *task for the progress thread.
  bool startOnCaller(std::unique_ptr<Task>& task);

  loomComm* comm_;
  std::mutex mutex_;
  std::condition_variable changed_;  // queue, completion or stop
  std::deque<std::unique_ptr<Task>> pending_;
  std::vector<std::unique_ptr<Task>> active_;  // touched by the progress thread only (after admission)
  // An operation its submitting thread started (startOnCaller) and did not finish: the progress thread
  // moves it into active_ under the lock (the caller must not touch active_, read there unlocked).
  std::unique_ptr<Task> handedOver_;
  std::set<uint64_t> doneOutOfOrder_;
  uint64_t completedUpTo_ = 0;
  uint64_t lastSubmitted_ = 0;
  std::atomic<uint64_t> submissions_{0};  // lets a thread about to sleep notice new work
  Status failure_;
  bool stop_ = false;
  // A caller is running an operation (submit): the progress thread admits nothing until it is done.
  bool callerDriving_ = false;
  std::thread thread_;
};

}  // namespace loom
