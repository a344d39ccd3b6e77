#include "algorithms/cost_model.h"

#include <algorithm>
#include <limits>

namespace loom {
namespace {

// Messages per lane past which time is taken as linear in size.
constexpr uint64_t kSteadyPieces = 32;

// Elements of a channel's part that make every piece of the algorithm the same size: ring and
// hierarchical AllReduce and direct AllReduce cut a channel's part into nranks blocks or chunks, the
// tree into two halves.
uint64_t alignment(Algorithm algo, Collective coll, int n) {
  switch (algo) {
    case Algorithm::Ring:
    case Algorithm::Direct: return coll == Collective::AllReduce ? static_cast<uint64_t>(n) : 1;
    case Algorithm::Hierarchical: return static_cast<uint64_t>(n);
    case Algorithm::Tree: return 2;
    case Algorithm::OneShot: return 1;
  }
  return 1;
}

uint64_t saturatingMul(uint64_t a, uint64_t b) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) return std::numeric_limits<uint64_t>::max();
  return a * b;
}

uint64_t ringsHash(const std::vector<std::vector<int>>& rings) {
  uint64_t h = 1469598103934665603ull;
  for (const auto& ring : rings) {
    for (int r : ring) h = (h ^ static_cast<uint64_t>(r + 1)) * 1099511628211ull;
    h = (h ^ 0xffu) * 1099511628211ull;
  }
  return h;
}

bool sameSteps(const Lane& a, const Lane& b) {
  if (a.steps.size() != b.steps.size()) return false;
  for (size_t s = 0; s < a.steps.size(); ++s) {
    const Step& x = a.steps[s];
    const Step& y = b.steps[s];
    if (x.kind != y.kind || x.count != y.count || x.sendPeer != y.sendPeer || x.recvPeer != y.recvPeer) return false;
  }
  return true;
}

// When every channel of every plan has the same lanes as channel 0 (same steps, peers and sizes: the
// channels split the data evenly over identical orderings), the channels run in lockstep, each with
// 1/nchannels of every port and NIC and of its rank's engine. Then channel 0 alone on a machine with
// that share times the same: keeps only channel 0's lanes and returns the scaled machine.
bool foldChannels(int nchannels, std::vector<Plan>* plans, MachineModel* machine) {
  if (nchannels <= 1) return false;
  for (const Plan& plan : *plans) {
    std::vector<std::vector<const Lane*>> byChannel(nchannels);
    for (const Lane& lane : plan.lanes) {
      if (lane.channel >= static_cast<uint32_t>(nchannels)) return false;
      byChannel[lane.channel].push_back(&lane);
    }
    for (int c = 1; c < nchannels; ++c) {
      if (byChannel[c].size() != byChannel[0].size()) return false;
      for (size_t l = 0; l < byChannel[0].size(); ++l)
        if (!sameSteps(*byChannel[0][l], *byChannel[c][l])) return false;
    }
  }
  for (Plan& plan : *plans) std::erase_if(plan.lanes, [](const Lane& lane) { return lane.channel != 0; });
  const double share = static_cast<double>(nchannels);
  machine->intraGbs /= share;
  machine->nicGbs /= share;
  machine->copyGbs /= share;
  machine->stepUs *= share;
  return true;
}

}  // namespace

bool isShiftedPlan(const Plan& a, const Plan& b, int shift, int n) {
  if (a.lanes.size() != b.lanes.size()) return false;
  auto moved = [&](int peer) { return peer < 0 ? peer : (peer + shift) % n; };
  for (size_t l = 0; l < a.lanes.size(); ++l) {
    const Lane& la = a.lanes[l];
    const Lane& lb = b.lanes[l];
    if (la.channel != lb.channel || la.steps.size() != lb.steps.size()) return false;
    for (size_t s = 0; s < la.steps.size(); ++s) {
      const Step& x = la.steps[s];
      const Step& y = lb.steps[s];
      if (x.kind != y.kind || x.count != y.count || x.finalize != y.finalize || moved(x.sendPeer) != y.sendPeer ||
          moved(x.recvPeer) != y.recvPeer)
        return false;
    }
  }
  return true;
}

CostModel::Key CostModel::key(Algorithm algo, const PlanRequest& req) const {
  const bool rooted = req.coll == Collective::Broadcast || req.coll == Collective::Reduce ||
                      req.coll == Collective::Gather || req.coll == Collective::Scatter;
  return Key{static_cast<int>(algo), static_cast<int>(req.coll), req.count, req.elemSize, req.chunkElems,
             req.nchannels, rooted ? req.root : 0, req.ranksPerNode, ringsHash(req.rings)};
}

uint64_t CostModel::scaledCount(Algorithm algo, const PlanRequest& req) const {
  const uint64_t align = alignment(algo, req.coll, req.nranks);
  const uint64_t loops = std::max<uint64_t>(1, (kSteadyPieces + align - 1) / align);
  return saturatingMul(saturatingMul(saturatingMul(static_cast<uint64_t>(req.nchannels), req.chunkElems), align),
                       loops);
}

uint64_t CostModel::exactLimit(Algorithm algo, const PlanRequest& req) const {
  if (algo == Algorithm::OneShot) return std::numeric_limits<uint64_t>::max();  // always one message
  return saturatingMul(scaledCount(algo, req), 2);
}

Status CostModel::buildPlans(Algorithm algo, const PlanRequest& req, std::vector<Plan>* plans) const {
  const int n = req.nranks;
  const int g = machine_.symmetryShift();
  PlanRequest rr = req;  // one copy: rings may hold nchannels x nranks entries
  auto build = [&](int rank, Plan* plan) {
    rr.rank = rank;
    return buildPlan(algo, rr, plan);
  };
  if (g < n) {
    plans->assign(g, Plan{});
    for (int r = 0; r < g; ++r) LOOM_TRY(build(r, &(*plans)[r]));
    // Sampled invariance: r against r + j*g for the next, second, middle and last orbit position.
    const int orbit = n / g;
    bool symmetric = true;
    Plan shifted;
    for (int j : {1, 2, orbit / 2, orbit - 1}) {
      if (j < 1 || j >= orbit) continue;
      for (int r = 0; r < g && symmetric; ++r) {
        LOOM_TRY(build(r + j * g, &shifted));
        symmetric = isShiftedPlan((*plans)[r], shifted, j * g, n);
      }
    }
    if (symmetric) return Status::Ok();
  }
  plans->assign(n, Plan{});
  for (int r = 0; r < n; ++r) LOOM_TRY(build(r, &(*plans)[r]));
  return Status::Ok();
}

Status CostModel::simulateExact(Algorithm algo, const PlanRequest& req, SimulationResult* result) {
  if (req.nranks != machine_.nranks)
    return invalidArgument("cost model: request for {} ranks on a machine of {}", req.nranks, machine_.nranks);
  std::vector<Plan> plans;
  LOOM_TRY(buildPlans(algo, req, &plans));
  MachineModel machine = machine_;
  if (foldChannels_) foldChannels(req.nchannels, &plans, &machine);
  if (static_cast<int>(plans.size()) < req.nranks) {
    if (simulatePlans(machine, plans, req.elemSize, result).ok()) return Status::Ok();
    // The sample missed an asymmetry; run every rank.
    plans.assign(req.nranks, Plan{});
    PlanRequest rr = req;
    for (int r = 0; r < req.nranks; ++r) {
      rr.rank = r;
      LOOM_TRY(buildPlan(algo, rr, &plans[r]));
    }
    machine = machine_;
    if (foldChannels_) foldChannels(req.nchannels, &plans, &machine);
  }
  return simulatePlans(machine, plans, req.elemSize, result);
}

Status CostModel::predict(Algorithm algo, const PlanRequest& req, double* us) {
  const Key k = key(algo, req);
  if (auto it = cache_.find(k); it != cache_.end()) {
    *us = it->second;
    return Status::Ok();
  }
  double time = 0;
  if (req.count <= exactLimit(algo, req)) {
    SimulationResult result;
    LOOM_TRY(simulateExact(algo, req, &result));
    time = result.timeUs;
  } else {
    // Linear beyond two representative sizes (each cached, so shared by every larger size).
    PlanRequest small = req;
    small.count = scaledCount(algo, req);
    double t1 = 0, t2 = 0;
    LOOM_TRY(predict(algo, small, &t1));
    small.count *= 2;
    LOOM_TRY(predict(algo, small, &t2));
    const double c1 = static_cast<double>(small.count / 2);
    time = t2 + std::max(0.0, t2 - t1) * (static_cast<double>(req.count) - 2 * c1) / c1;
  }
  cache_.emplace(k, time);
  *us = time;
  return Status::Ok();
}

Status CostModel::lowerBound(Algorithm algo, const PlanRequest& req, double* us) {
  PlanRequest rr = req;
  rr.rank = 0;
  // Fewer steps at a smaller size: still a bound, and the plan stays small.
  rr.count = std::min(req.count, exactLimit(algo, req));
  Plan plan;
  LOOM_TRY(buildPlan(algo, rr, &plan));
  uint64_t steps = 0;
  for (const Lane& lane : plan.lanes) steps += lane.steps.size();
  *us = static_cast<double>(steps) * machine_.stepUs;
  return Status::Ok();
}

}  // namespace loom
