#include "core/group.h"

#include <algorithm>
#include <map>
#include <vector>

#include "core/communicator.h"
#include "core/async_engine.h"
#include "core/device_plans.h"    // [CUDA hook, issue 8]
#include "core/device_staging.h"  // [CUDA hook, issue 8]
#include "core/executor.h"
#include "core/planner.h"
#include "core/signature_check.h"

namespace loom {
namespace {

struct GroupState {
  int depth = 0;
  std::vector<Operation> ops;
};
thread_local GroupState tlsGroup;

CommWork workFor(loomComm_t comm) {
  CommWork w;
  w.transports = comm->transports.get();
  w.abort = &comm->aborted;
  w.timeoutMs = comm->settings.timeoutMs;
  w.spinNs = comm->spinNs;
  w.oversubscribed = comm->oversubscribed;
  w.tracer = comm->tracer.get();
  return w;
}

// Plans one communicator's share of a group: each collective in call order, then one plan for all
// its point-to-point operations. A communicator with a progress thread gets them queued there; a
// blocking one without gets them appended to `blocking` for the caller to run. Gated operations
// (device buffers staged on a stream) always go to the progress thread, which starts it if needed.
Status planForComm(loomComm_t comm, const std::vector<Operation>& ops, bool soleComm, std::vector<CommWork>* blocking) {
  LOOM_TRY(checkCommUsable(comm));
  const bool gated = std::any_of(ops.begin(), ops.end(), [&](const Operation& op) { return op.comm == comm && op.gate; });
  if (gated && !comm->engine) comm->engine = std::make_unique<AsyncEngine>(comm);
  AsyncEngine* engine = comm->engine.get();
  CommWork w = workFor(comm);
  std::vector<Operation> p2p;
  std::vector<std::shared_ptr<OperationGate>> p2pGates;
  for (const Operation& op : ops) {
    if (op.comm != comm) continue;
    if (op.coll == Collective::SendRecv) {
      p2p.push_back(op);
      if (op.gate) p2pGates.push_back(op.gate);
      continue;
    }
    ++comm->opCount;
    // The check talks over the bootstrap and would wait forever for ranks this same thread drives.
    if (comm->settings.checkSignatures && soleComm) LOOM_TRY(checkCollectiveSignature(comm, op, comm->opCount));
    BoundPlan bp;
    if (op.count > 0) LOOM_TRY(planCollective(comm, op, &bp));
    if (engine) {
      CommWork single = workFor(comm);
      if (op.count > 0) single.plans.push_back(std::move(bp));
      engine->submit(comm->opCount, std::move(single), true, op.gate ? std::vector{op.gate} : std::vector<std::shared_ptr<OperationGate>>{});
    } else if (op.count > 0) {
      w.plans.push_back(std::move(bp));
    }
  }
  if (!p2p.empty()) {
    ++comm->opCount;
    BoundPlan bp;
    LOOM_TRY(planPointToPoint(comm, p2p, &bp));
    CommWork single = workFor(comm);
    CommWork& target = engine ? single : w;
    if (!bp.plan->lanes.empty()) target.plans.push_back(std::move(bp));
    if (engine) engine->submit(comm->opCount, std::move(single), false, std::move(p2pGates));
  }
  if (!engine) blocking->push_back(std::move(w));
  return Status::Ok();
}

// A blocking communicator whose progress thread runs gated operations still returns from a host
// operation only when it is complete: it waits for its own queued work.
Status waitIfBlocking(loomComm_t comm, const std::vector<Operation>& ops) {
  if (!comm->settings.blocking || !comm->engine) return Status::Ok();
  const bool ungated = std::any_of(ops.begin(), ops.end(), [&](const Operation& op) { return op.comm == comm && !op.gate; });
  return ungated ? comm->engine->wait(comm->opCount, -1) : Status::Ok();
}

// Runs (or queues) operations of possibly several communicators; each is locked meanwhile.
Status runHostOperations(const std::vector<Operation>& ops) {
  std::vector<loomComm_t> comms;
  for (const Operation& op : ops)
    if (std::find(comms.begin(), comms.end(), op.comm) == comms.end()) comms.push_back(op.comm);
  std::vector<std::unique_lock<std::mutex>> locks;
  for (loomComm_t comm : comms) locks.emplace_back(comm->busy);
  std::vector<CommWork> work;
  std::vector<loomComm_t> blockingComms;
  for (loomComm_t comm : comms) {
    LOOM_TRY(planForComm(comm, ops, comms.size() == 1, &work));
    if (!comm->engine) blockingComms.push_back(comm);
  }
  for (loomComm_t comm : comms) LOOM_TRY(waitIfBlocking(comm, ops));
  if (work.empty()) return Status::Ok();
  int failed = -1;
  Status st = executeWork(work, &failed);
  if (!st.ok()) {
    // The peers of every communicator of the group may now wait on us: tell them all.
    for (loomComm_t comm : blockingComms) {
      if (!comm->aborted.load()) markCommFailed(comm, st, true);
      std::lock_guard<std::mutex> lock(comm->errorMutex);
      comm->lastError = st.message();
    }
  }
  return st;
}

// [CUDA hook, issue 8] Device buffers run as plan kernels where every rank can (core/device_plans.h),
// else over pinned host copies (core/device_staging.h); without CUDA, or with host buffers only, this
// is runHostOperations(ops).
// What is on a stream being captured into a CUDA graph and cannot run as plan kernels never gets
// here: runWithDevicePlans refuses it (core/stream_capture.h).
Status runStaged(const std::vector<Operation>& ops) { return runWithDeviceStaging(ops, runHostOperations); }
Status runOperations(const std::vector<Operation>& ops) { return runWithDevicePlans(ops, runStaged); }

}  // namespace

Status submitOperation(const Operation& op) {
  LOOM_TRY(validateOperation(op));
  if (tlsGroup.depth > 0) {
    tlsGroup.ops.push_back(op);
    return Status::Ok();
  }
  return runOperations({op});
}

Status groupStart() {
  ++tlsGroup.depth;
  return Status::Ok();
}

Status groupEnd() {
  if (tlsGroup.depth == 0) return errorStatus(loomInvalidUsage, "loomGroupEnd without loomGroupStart");
  if (--tlsGroup.depth > 0) return Status::Ok();
  std::vector<Operation> ops;
  ops.swap(tlsGroup.ops);
  if (ops.empty()) return Status::Ok();
  return runOperations(ops);
}

}  // namespace loom
