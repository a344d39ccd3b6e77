// The executor: runs plans over a rank's connections. Lanes of a plan progress independently and
// without blocking; when no lane of any running plan can move, the caller spins briefly and then
// sleeps on its doorbell (or polls its sockets), so oversubscribed ranks leave the cores to others.
// A group may run plans of several communicators at once (one thread driving many ranks).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/plan.h"
#include "core/operation.h"
#include "base/status.h"
#include "kernels/cpu/reduce.h"
#include "transport/transport_set.h"

namespace loom {

// One plan bound to memory: what an operation needs to run on one rank.
struct BoundPlan {
  std::shared_ptr<const Plan> plan;  // shared with the communicator's plan cache
  std::vector<char*> buffers;  // indexed by plan buffer id
  loomDataType_t dtype = loomUint8;
  size_t elemSize = 1;
  ReduceOp op;
  // What the operation was, for messages (formatted only when one is needed).
  std::string (*describe)(const BoundPlan&) = nullptr;
  const void* comm = nullptr;
  Operation call;
  uint64_t seq = 0;
  size_t groupSize = 0;
  std::vector<char> scratch;   // Plan::scratchElems elements
  std::vector<char> stagedSend;  // a copy of the send buffer when it overlaps the output oddly
};

// The plans one communicator runs, in order, and what the executor needs of that communicator.
struct CommWork {
  TransportSet* transports = nullptr;
  const std::atomic<bool>* abort = nullptr;
  int64_t timeoutMs = 0;  // no progress for this long -> loomTimeout (0: never)
  int rank = 0;
  int64_t spinNs = 0;     // how long to spin before sleeping when nothing moves
  bool oversubscribed = false;  // yield the core while spinning
  std::vector<BoundPlan> plans;
};

inline std::string describePlan(const BoundPlan& bp) { return bp.describe ? bp.describe(bp) : "operation"; }

// Runs every CommWork's plans to completion. On failure returns the first error, with the operation,
// the communicator and the step that failed in its message; *failedComm says which CommWork (or -1).
Status executeWork(std::vector<CommWork>& work, int* failedComm);

}  // namespace loom
