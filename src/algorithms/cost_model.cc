#include "algorithms/cost_model.h"

#include <algorithm>
#include <limits>

#include "algorithms/registry.h"
#include "base/hash.h"

namespace loom {
namespace {

// Messages per lane past which time is taken as linear in size.
constexpr uint64_t kSteadyPieces = 32;
// Steps one simulation should run at most; representative sizes shrink to fit.
constexpr uint64_t kStepBudget = 150000;
// Cached predictions per model; past this the cache starts over.
constexpr size_t kMaxCached = 100000;

uint64_t saturatingMul(uint64_t a, uint64_t b) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) return std::numeric_limits<uint64_t>::max();
  return a * b;
}

uint64_t ringsHash(const std::vector<std::vector<int>>& rings) {
  Fnv1a h;
  for (const auto& ring : rings) h.value(ring.size()).bytes(ring.data(), ring.size() * sizeof(int));
  return h.digest();
}

uint64_t stepCount(const std::vector<Plan>& plans) {
  uint64_t steps = 0;
  for (const Plan& plan : plans)
    for (const Lane& lane : plan.lanes) steps += lane.steps.size();
  return steps;
}

// Rank 0's plan without its counts and offsets: lanes, channels, step kinds, peers, finalize flags.
uint64_t shapeHash(const Plan& plan) {
  Fnv1a h;
  auto mix = [&](uint64_t v) { h.value(v); };
  for (const Lane& lane : plan.lanes) {
    mix(0x100000000ull | lane.channel);
    for (const Step& s : lane.steps)
      mix((static_cast<uint64_t>(s.kind) << 56) ^ (static_cast<uint64_t>(s.finalize) << 48) ^
          (static_cast<uint64_t>(static_cast<uint32_t>(s.sendPeer)) << 24) ^ static_cast<uint32_t>(s.recvPeer));
  }
  return h.digest();
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

Status CostModel::buildPlans(Algorithm algo, const PlanRequest& req, bool allRanks, std::vector<Plan>* plans,
                             bool* symmetric) const {
  const int n = req.nranks;
  const int g = machine_.symmetryShift();
  PlanRequest rr = req;  // one copy: rings may hold nchannels x nranks entries
  auto build = [&](int rank, Plan* plan) {
    rr.rank = rank;
    return buildPlan(algo, rr, plan);
  };
  *symmetric = false;
  plans->clear();
  if (g < n) {
    plans->assign(g, Plan{});
    for (int r = 0; r < g; ++r) LOOM_TRY(build(r, &(*plans)[r]));
    // Sampled invariance: every representative against the next orbit position, the first and last
    // representatives against the middle and the last one (the wrap-around).
    const int orbit = n / g;
    bool same = true;
    Plan shifted;
    for (int j : {1, orbit / 2, orbit - 1}) {
      if (j < 1 || j >= orbit) continue;
      for (int r = 0; r < g && same; r += (j == 1 ? 1 : std::max(1, g - 1))) {
        LOOM_TRY(build(r + j * g, &shifted));
        same = isShiftedPlan((*plans)[r], shifted, j * g, n);
      }
    }
    *symmetric = same;
    if (same || !allRanks) return Status::Ok();
  }
  plans->resize(n);
  for (int r = static_cast<int>(std::min<size_t>(plans->size(), g < n ? g : 0)); r < n; ++r)
    LOOM_TRY(build(r, &(*plans)[r]));
  return Status::Ok();
}

Status CostModel::simulateExact(Algorithm algo, const PlanRequest& req, SimulationResult* result) {
  if (req.nranks != machine_.nranks)
    return invalidArgument("cost model: request for {} ranks on a machine of {}", req.nranks, machine_.nranks);
  std::vector<Plan> plans;
  bool symmetric = false;
  LOOM_TRY(buildPlans(algo, req, true, &plans, &symmetric));
  if (symmetric) {
    if (simulatePlans(machine_, plans, req.elemSize, result).ok()) return Status::Ok();
    // The sample missed an asymmetry (the run found unmatched messages): run every rank.
    const size_t built = plans.size();
    plans.resize(req.nranks);
    PlanRequest rr = req;
    for (int r = static_cast<int>(built); r < req.nranks; ++r) {
      rr.rank = r;
      LOOM_TRY(buildPlan(algo, rr, &plans[r]));
    }
  }
  return simulatePlans(machine_, plans, req.elemSize, result);
}

uint64_t CostModel::scaledCount(Algorithm algo, const PlanRequest& req) {
  Key k = key(algo, req);
  std::get<2>(k) = 0;  // the same for every count
  if (auto it = scaled_.find(k); it != scaled_.end()) return it->second;
  const uint64_t align = algorithmEntry(algo).alignment(req.coll, req.nranks);
  const uint64_t unit = saturatingMul(saturatingMul(static_cast<uint64_t>(req.nchannels), req.chunkElems), align);
  uint64_t loops = std::max<uint64_t>(1, (kSteadyPieces + align - 1) / align);
  // What a run of one unit costs, as simulated: representatives' steps, or all ranks' when asymmetric.
  PlanRequest one = req;
  one.count = unit;
  std::vector<Plan> plans;
  bool symmetric = false;
  if (unit < std::numeric_limits<uint32_t>::max() && buildPlans(algo, one, false, &plans, &symmetric).ok() &&
      !plans.empty()) {
    uint64_t steps = stepCount(plans);
    if (!symmetric) steps = saturatingMul(steps / plans.size() + 1, static_cast<uint64_t>(req.nranks));
    while (loops > 1 && saturatingMul(steps, 2 * loops) > kStepBudget) loops /= 2;
  }
  const uint64_t count1 = saturatingMul(unit, loops);
  scaled_.emplace(k, count1);
  return count1;
}

uint64_t CostModel::exactLimit(Algorithm algo, const PlanRequest& req) {
  if (algorithmEntry(algo).oneMessage) return std::numeric_limits<uint64_t>::max();  // any size is one message
  return saturatingMul(scaledCount(algo, req), 2);
}

Status CostModel::predict(Algorithm algo, const PlanRequest& req, double* us) {
  Point point;
  LOOM_TRY(predictPoint(algo, req, &point));
  *us = point.us;
  return Status::Ok();
}

Status CostModel::predictPoint(Algorithm algo, const PlanRequest& req, Point* point) {
  const Key k = key(algo, req);
  if (auto it = cache_.find(k); it != cache_.end()) {
    *point = it->second;
    return Status::Ok();
  }
  Point result{req.count, 0, 0};
  if (req.count <= exactLimit(algo, req)) {
    PlanRequest r0 = req;
    r0.rank = 0;
    Plan plan;
    LOOM_TRY(buildPlan(algo, r0, &plan));
    // Plans of one shape and count are the same plans whatever chunkElems produced them.
    Key general = k;
    std::get<2>(general) = 0;
    std::get<4>(general) = 0;
    std::vector<Point>& points = points_[ShapeKey{general, shapeHash(plan)}];
    const Point* below = nullptr;
    const Point* above = nullptr;
    for (const Point& p : points) {
      if (p.count <= req.count && (below == nullptr || p.count > below->count)) below = &p;
      if (p.count >= req.count && (above == nullptr || p.count < above->count)) above = &p;
    }
    if (below != nullptr && above != nullptr) {
      // Between two runs of this shape: time is convex and nearly affine in the bytes per message.
      const double span = static_cast<double>(above->count) - static_cast<double>(below->count);
      const double at = span > 0 ? (static_cast<double>(req.count) - static_cast<double>(below->count)) / span : 0.0;
      result.us = below->us + (above->us - below->us) * at;
      result.busiestUs = below->busiestUs + (above->busiestUs - below->busiestUs) * at;
    } else {
      SimulationResult run;
      LOOM_TRY(simulateExact(algo, req, &run));
      result.us = run.timeUs;
      result.busiestUs = run.busiestUs;
      points.push_back(result);
    }
  } else {
    // Linear beyond two representative sizes (each cached, so shared by every larger size), and never
    // below the busiest resource's load, which grows with the bytes: a short run's slope can miss
    // part of the steady state's contention.
    PlanRequest small = req;
    small.count = scaledCount(algo, req);
    Point p1, p2;
    LOOM_TRY(predictPoint(algo, small, &p1));
    small.count *= 2;
    LOOM_TRY(predictPoint(algo, small, &p2));
    const double c2 = static_cast<double>(p2.count);
    const double c1 = static_cast<double>(p1.count);
    const double c = static_cast<double>(req.count);
    result.busiestUs = p2.busiestUs * c / c2;
    result.us = std::max(p2.us + std::max(0.0, p2.us - p1.us) * (c - c2) / (c2 - c1), result.busiestUs);
  }
  if (cache_.size() >= kMaxCached) {
    cache_.clear();
    points_.clear();
  }
  cache_.emplace(k, result);
  *point = result;
  return Status::Ok();
}

Status CostModel::lowerBound(Algorithm algo, const PlanRequest& req, double* us) {
  PlanRequest rr = req;
  rr.rank = 0;
  // Fewer steps at a smaller size: still a bound, and the plan stays small.
  rr.count = std::min(req.count, exactLimit(algo, req));
  Plan plan;
  LOOM_TRY(buildPlan(algo, rr, &plan));
  // A rank's steps run one after another, or, where its lanes run side by side, its longest lane's.
  uint64_t steps = 0;
  for (const Lane& lane : plan.lanes)
    steps = machine_.lanesInParallel ? std::max<uint64_t>(steps, lane.steps.size()) : steps + lane.steps.size();
  *us = static_cast<double>(steps) * machine_.stepUs + machine_.launchUs;
  return Status::Ok();
}

}  // namespace loom
