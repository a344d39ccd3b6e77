// Predicted time of one algorithm for one operation shape: builds the plans and times them with the
// plan simulator. Two things keep that cheap enough to run per size class:
//   - Symmetry: when the machine and the plans are invariant under shifting ranks by g (ring and
//     hierarchical plans on identical nodes, ...), only g ranks are simulated. Invariance is checked on
//     a sample of shifted plans (rank r against r + j*g for a few j) and confirmed by the run itself,
//     which fails on unmatched messages; any doubt falls back to simulating every rank.
//   - Scaling: past a few dozen messages per lane, time grows linearly with size, so large operations
//     are timed at two representative sizes (count1, 2*count1: whole pipeline loops, so that pieces
//     stay equal and plans symmetric) and extrapolated. Those two runs are the same for every large
//     size, so they are cached once.
// Results are cached per shape. Not thread-safe; the tuner serializes access.
#pragma once

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "algorithms/builders.h"
#include "algorithms/machine_model.h"
#include "algorithms/plan.h"
#include "algorithms/plan_simulator.h"
#include "base/status.h"

namespace loom {

class CostModel {
 public:
  explicit CostModel(const MachineModel& machine) : machine_(machine) {}

  const MachineModel& machine() const { return machine_; }

  // Predicted microseconds for algo on req (req.rank is ignored; req.nranks must be the machine's).
  // Fails like the builder when algo cannot serve req.
  Status predict(Algorithm algo, const PlanRequest& req, double* us);

  // A cheap lower bound on predict(): the steps of rank 0's plan at machine.stepUs each. Also checks
  // that the builder accepts req.
  Status lowerBound(Algorithm algo, const PlanRequest& req, double* us);

  // Exact simulation of one size, without scaling (symmetry still applies). For tests and tools.
  Status simulateExact(Algorithm algo, const PlanRequest& req, SimulationResult* result);

  // Sizes at and below this count are simulated exactly; larger ones are extrapolated.
  uint64_t exactLimit(Algorithm algo, const PlanRequest& req) const;

 private:
  // (algorithm, collective, count, elemSize, chunkElems, nchannels, root, ranksPerNode, rings hash)
  using Key = std::tuple<int, int, uint64_t, size_t, uint64_t, int, int, int, uint64_t>;
  Key key(Algorithm algo, const PlanRequest& req) const;
  uint64_t scaledCount(Algorithm algo, const PlanRequest& req) const;  // count1
  Status buildPlans(Algorithm algo, const PlanRequest& req, std::vector<Plan>* plans) const;

  MachineModel machine_;
  std::map<Key, double> cache_;
 public:
  bool foldChannels_ = false;
};

// True when b is a with every peer shifted by `shift` (mod n): same lanes, channels, step kinds,
// counts and finalize flags; offsets may differ. The simulator needs nothing else.
bool isShiftedPlan(const Plan& a, const Plan& b, int shift, int n);

}  // namespace loom
