// Predicted time of one algorithm for one operation shape: builds the plans and times them with the
// plan simulator. Two things keep that cheap enough to run per size class:
//   - Symmetry: when the machine and the plans are invariant under shifting ranks by g (ring and
//     hierarchical plans on identical nodes, ...), only g ranks are simulated. Invariance is checked on
//     a sample of shifted plans (rank r against r + j*g for a few j) and confirmed by the run itself,
//     which fails on unmatched messages; any doubt falls back to simulating every rank.
//   - Scaling: past a few dozen messages per lane, time grows linearly with size, so large operations
//     are timed at two representative sizes (count1 and 2*count1: whole pipeline loops, so that pieces
//     stay equal and plans symmetric) and extrapolated. count1 shrinks, down to one loop, until a run
//     fits a step budget. Those two runs serve every larger size.
//   - Same shape: plans with the same shape (rank 0's lanes, steps and peers, whatever their counts)
//     and count are the same plans, whichever chunk size produced them (a ring's single loop, a tree's
//     single piece), so they are simulated once; a size between two simulated sizes of one shape
//     differs from them only in bytes per message and is interpolated (time is convex and nearly
//     affine in those; extrapolating would miss the turn from latency- to bandwidth-bound).
// Results are cached. Not thread-safe; the tuner serializes access.
#pragma once

#include <cstdint>
#include <map>
#include <tuple>
#include <utility>
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

  // A cheap lower bound on predict(): rank 0's steps at stepUs each (its engine runs them one at a
  // time; its longest lane's, where lanes run in parallel). Fails like the builder when algo cannot
  // serve req.
  Status lowerBound(Algorithm algo, const PlanRequest& req, double* us);

  // Simulation of exactly req.count, without scaling (symmetry still applies). For tests and tools.
  Status simulateExact(Algorithm algo, const PlanRequest& req, SimulationResult* result);

  // Counts up to this are simulated exactly; larger ones are extrapolated.
  uint64_t exactLimit(Algorithm algo, const PlanRequest& req);

 private:
  // (algorithm, collective, count, elemSize, chunkElems, nchannels, root, ranksPerNode, rings hash)
  using Key = std::tuple<int, int, uint64_t, size_t, uint64_t, int, int, int, uint64_t>;
  Key key(Algorithm algo, const PlanRequest& req) const;
  uint64_t scaledCount(Algorithm algo, const PlanRequest& req);  // count1
  // The plans to simulate: ranks 0..g-1 when the sample says they are symmetric (*symmetric), else
  // every rank's, or (allRanks false) only the representatives built so far.
  Status buildPlans(Algorithm algo, const PlanRequest& req, bool allRanks, std::vector<Plan>* plans,
                    bool* symmetric) const;

  struct Point {
    uint64_t count;
    double us;
    double busiestUs;  // SimulationResult::busiestUs
  };
  // Simulated sizes per (key without count and chunkElems, rank 0's plan shape).
  using ShapeKey = std::pair<Key, uint64_t>;

  Status predictPoint(Algorithm algo, const PlanRequest& req, Point* point);

  MachineModel machine_;
  std::map<Key, Point> cache_;
  std::map<Key, uint64_t> scaled_;
  std::map<ShapeKey, std::vector<Point>> points_;
};

// True when b is a with every peer shifted by `shift` (mod n): same lanes, channels, step kinds,
// counts and finalize flags; offsets may differ. The simulator needs nothing else.
bool isShiftedPlan(const Plan& a, const Plan& b, int shift, int n);

}  // namespace loom
