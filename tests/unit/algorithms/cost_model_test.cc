// The cost model: predictions approach the bandwidth bounds for large messages, grow with size, agree
// with exact simulation where they extrapolate, and see what the hierarchy saves on slow NICs.
#include <gtest/gtest.h>

#include <vector>

#include "algorithms/cost_model.h"
#include "algorithms/rail_rings.h"

namespace loom {
namespace {

PlanRequest allReduce(int n, uint64_t bytes, uint64_t chunkBytes, int channels) {
  PlanRequest req;
  req.coll = Collective::AllReduce;
  req.nranks = n;
  req.elemSize = 4;
  req.count = bytes / 4;
  req.chunkElems = chunkBytes / 4;
  req.nchannels = channels;
  return req;
}

MachineModel node(int n, double gbs) {
  MachineModel m = defaultMachine(n, 0);
  m.intraGbs = gbs;
  m.intraLatencyUs = 2;
  return m;
}

// nccl-tests' ring bound: t = S/B * 2(n-1)/n.
TEST(CostModel, RingAllReduceTendsToTheBusBandwidthBound) {
  for (int n : {4, 8, 16}) {
    CostModel model(node(n, 50));
    for (uint64_t mib : {256, 1024, 4096}) {
      const uint64_t bytes = mib << 20;
      double us = 0;
      ASSERT_TRUE(model.predict(Algorithm::Ring, allReduce(n, bytes, 256 << 10, 4), &us).ok());
      const double bound = static_cast<double>(bytes) / (50 * 1e3) * 2 * (n - 1) / n;
      EXPECT_GE(us, bound * 0.999) << "n=" << n << " " << mib << " MiB";
      EXPECT_LE(us, bound * 1.05) << "n=" << n << " " << mib << " MiB";
    }
  }
}

TEST(CostModel, ExtrapolationAgreesWithExactSimulation) {
  CostModel model(node(8, 20));
  for (Algorithm algo : {Algorithm::Ring, Algorithm::Tree, Algorithm::Direct}) {
    const PlanRequest small = allReduce(8, 4 << 10, 4 << 10, 2);
    PlanRequest big = small;
    big.count = model.exactLimit(algo, small) * 3;
    double predicted = 0;
    ASSERT_TRUE(model.predict(algo, big, &predicted).ok());
    SimulationResult exact;
    ASSERT_TRUE(model.simulateExact(algo, big, &exact).ok());
    EXPECT_NEAR(predicted, exact.timeUs, 0.03 * exact.timeUs) << algorithmName(algo);
  }
}

TEST(CostModel, TimeGrowsWithSize) {
  for (Algorithm algo : {Algorithm::Ring, Algorithm::Tree, Algorithm::Direct}) {
    CostModel model(node(12, 20));
    double previous = 0;
    for (uint64_t bytes = 4; bytes <= (uint64_t{1} << 30); bytes *= 2) {
      double us = 0;
      ASSERT_TRUE(model.predict(algo, allReduce(12, bytes, 64 << 10, 2), &us).ok());
      EXPECT_GE(us, previous * 0.999) << algorithmName(algo) << " " << bytes << " bytes";
      previous = us;
    }
  }
}

TEST(CostModel, EightBytesCostAtLeastOneHop) {
  CostModel model(node(8, 100));
  for (Algorithm algo : {Algorithm::Ring, Algorithm::Tree, Algorithm::Direct, Algorithm::OneShot}) {
    double us = 0;
    ASSERT_TRUE(model.predict(algo, allReduce(8, 8, 256 << 10, 1), &us).ok());
    EXPECT_GE(us, 2.0) << algorithmName(algo);
  }
}

// Slow NICs, fast nodes: the hierarchy sends a 1/ranksPerNode share across nodes per rank, on every
// rail, where a flat ring pushes its whole share through the node boundary's single pair of ranks.
TEST(CostModel, HierarchicalBeatsFlatRingOnSlowNics) {
  MachineModel m = defaultMachine(32, 8);
  m.intraGbs = 200;
  m.nicsPerNode = 8;
  m.nicGbs = 12.5;
  CostModel model(m);
  PlanRequest req = allReduce(32, 256 << 20, 256 << 10, 4);
  req.ranksPerNode = 8;
  double hier = 0, ring = 0;
  ASSERT_TRUE(model.predict(Algorithm::Hierarchical, req, &hier).ok());
  ASSERT_TRUE(model.predict(Algorithm::Ring, req, &ring).ok());
  EXPECT_LT(hier * 2, ring) << "hier " << hier << " us, flat ring " << ring << " us";
  // Rings that leave each node through a different rail close most of that gap, which is why the tuner
  // gives rings those orderings on multi-node machines.
  req.rings = railRings(32, 8, 4);
  double railRing = 0;
  ASSERT_TRUE(model.predict(Algorithm::Ring, req, &railRing).ok());
  EXPECT_LT(railRing, ring / 2);
}

TEST(CostModel, RefusesWhatTheBuilderRefuses) {
  CostModel model(node(4, 10));
  double us = 0;
  PlanRequest req = allReduce(4, 1 << 20, 4096, 1);
  EXPECT_EQ(model.predict(Algorithm::OneShot, req, &us).code(), loomInvalidArgument);
  EXPECT_EQ(model.lowerBound(Algorithm::Hierarchical, req, &us).code(), loomInvalidArgument);
  req.coll = Collective::AllGather;
  EXPECT_EQ(model.predict(Algorithm::Tree, req, &us).code(), loomInvalidArgument);
  req.nranks = 5;
  EXPECT_EQ(model.predict(Algorithm::Ring, req, &us).code(), loomInvalidArgument);
}

TEST(CostModel, ShiftedPlansAreRecognized) {
  PlanRequest req = allReduce(6, 6 * 40, 40, 2);
  std::vector<Plan> plans(6);
  for (int r = 0; r < 6; ++r) {
    req.rank = r;
    ASSERT_TRUE(buildRingPlan(req, &plans[r]).ok());
  }
  for (int shift = 1; shift < 6; ++shift) EXPECT_TRUE(isShiftedPlan(plans[0], plans[shift], shift, 6));
  EXPECT_FALSE(isShiftedPlan(plans[0], plans[1], 2, 6));
  req.coll = Collective::Broadcast;
  std::vector<Plan> rooted(2);
  for (int r = 0; r < 2; ++r) {
    req.rank = r;
    ASSERT_TRUE(buildRingPlan(req, &rooted[r]).ok());
  }
  EXPECT_FALSE(isShiftedPlan(rooted[0], rooted[1], 1, 6));
}

}  // namespace
}  // namespace loom
