#include "core/group.h"

#include <algorithm>
#include <map>
#include <vector>

#include "core/communicator.h"
#include "core/executor.h"
#include "core/planner.h"

namespace loom {
namespace {

struct GroupState {
  int depth = 0;
  std::vector<Operation> ops;
};
thread_local GroupState tlsGroup;

Status checkUsable(loomComm_t comm) {
  if (comm->aborted.load()) return errorStatus(loomInvalidUsage, "{} was aborted", comm->describe());
  if (comm->finalized) return errorStatus(loomInvalidUsage, "{} was finalized", comm->describe());
  if (comm->asyncError.load() != loomSuccess) {
    std::lock_guard<std::mutex> lock(comm->errorMutex);
    return errorStatus(loomInvalidUsage, "{} is unusable after an earlier error: {}", comm->describe(), comm->fatalError);
  }
  return Status::Ok();
}

// Runs operations of possibly several communicators; each communicator is locked while it runs.
Status runOperations(const std::vector<Operation>& ops) {
  std::vector<loomComm_t> comms;
  for (const Operation& op : ops)
    if (std::find(comms.begin(), comms.end(), op.comm) == comms.end()) comms.push_back(op.comm);
  std::vector<std::unique_lock<std::mutex>> locks;
  for (loomComm_t comm : comms) locks.emplace_back(comm->busy);
  std::vector<CommWork> work(comms.size());
  for (size_t i = 0; i < comms.size(); ++i) {
    loomComm_t comm = comms[i];
    LOOM_TRY(checkUsable(comm));
    CommWork& w = work[i];
    w.transports = comm->transports.get();
    w.abort = &comm->aborted;
    w.timeoutMs = comm->settings.timeoutMs;
    w.rank = comm->rank;
    w.spinNs = comm->spinNs;
    w.oversubscribed = comm->oversubscribed;
    std::vector<Operation> p2p;
    for (const Operation& op : ops) {
      if (op.comm != comm) continue;
      if (op.coll == Collective::SendRecv) {
        p2p.push_back(op);
        continue;
      }
      ++comm->opCount;
      if (op.count == 0) continue;
      BoundPlan bp;
      LOOM_TRY(planCollective(comm, op, &bp));
      w.plans.push_back(std::move(bp));
    }
    if (!p2p.empty()) {
      ++comm->opCount;
      BoundPlan bp;
      LOOM_TRY(planPointToPoint(comm, p2p, &bp));
      if (!bp.plan->lanes.empty()) w.plans.push_back(std::move(bp));
    }
  }
  int failed = -1;
  Status st = executeWork(work, &failed);
  if (!st.ok()) {
    // The peers of every communicator of the group may now wait on us: tell them all.
    for (loomComm_t comm : comms) {
      if (!comm->aborted.load()) markCommFailed(comm, st);
      std::lock_guard<std::mutex> lock(comm->errorMutex);
      comm->lastError = st.message();
    }
  }
  return st;
}

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
