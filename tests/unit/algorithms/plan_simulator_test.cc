// The plan simulator: hop latency, bandwidth, engine time, FIFO depth and contention come out of
// running the plans; symmetric runs match full ones; plans that cannot complete are reported.
#include <gtest/gtest.h>

#include <vector>

#include "algorithms/build_helpers.h"
#include "algorithms/builders.h"
#include "algorithms/plan_simulator.h"

namespace loom {
namespace {

using detail::recvRef;
using detail::recvStep;
using detail::sendRef;
using detail::sendStep;

MachineModel machine(int n, int perNode = 0) {
  MachineModel m = defaultMachine(n, perNode);
  m.intraGbs = 10;
  m.intraLatencyUs = 1;
  m.nicGbs = 1;
  m.netLatencyUs = 5;
  m.stepUs = 0.5;
  m.fifoSlots = 2;
  return m;
}

Plan plan(int n, int rank, std::vector<std::vector<Step>> lanes) {
  Plan p;
  p.coll = Collective::AllGather;
  p.nranks = n;
  p.rank = rank;
  for (auto& steps : lanes) {
    Lane lane;
    lane.steps = std::move(steps);
    p.lanes.push_back(std::move(lane));
  }
  return p;
}

std::vector<Plan> allPlans(Algorithm algo, const PlanRequest& req) {
  std::vector<Plan> plans(req.nranks);
  for (int r = 0; r < req.nranks; ++r) {
    PlanRequest rr = req;
    rr.rank = r;
    EXPECT_TRUE(buildPlan(algo, rr, &plans[r]).ok());
  }
  return plans;
}

TEST(PlanSimulator, OneMessageCostsStepsTransferAndLatency) {
  // 1 MB at 10 GB/s = 100 us; one hop of 1 us; a step of 0.5 us on each side.
  const std::vector<Plan> plans = {plan(2, 0, {{sendStep(1, sendRef(0), 250000)}}),
                                   plan(2, 1, {{recvStep(0, recvRef(0), 250000)}})};
  SimulationResult r;
  ASSERT_TRUE(simulatePlans(machine(2), plans, 4, &r).ok());
  EXPECT_NEAR(r.timeUs, 0.5 + 100 + 1 + 0.5, 1e-9);
  EXPECT_EQ(r.steps, 2u);
  EXPECT_EQ(r.messages, 1u);
  EXPECT_NEAR(r.busiestUs, 100, 1e-9);
  // Across nodes the NIC's rate and the network latency apply.
  ASSERT_TRUE(simulatePlans(machine(2, 1), plans, 4, &r).ok());
  EXPECT_NEAR(r.timeUs, 0.5 + 1000 + 5 + 0.5, 1e-9);
}

TEST(PlanSimulator, MessagesPipelineUpToTheFifoDepth) {
  // Eight messages one way: the transfers follow each other on the link, whatever the latency.
  std::vector<Step> sends, recvs;
  for (int i = 0; i < 8; ++i) {
    sends.push_back(sendStep(1, sendRef(i * 1000), 1000));
    recvs.push_back(recvStep(0, recvRef(i * 1000), 1000));
  }
  const std::vector<Plan> plans = {plan(2, 0, {sends}), plan(2, 1, {recvs})};
  MachineModel m = machine(2);
  m.stepUs = 0;
  m.intraLatencyUs = 100;  // much more than one transfer (0.4 us)
  SimulationResult deep, shallow;
  m.fifoSlots = 8;
  ASSERT_TRUE(simulatePlans(m, plans, 4, &deep).ok());
  EXPECT_NEAR(deep.timeUs, 8 * 0.4 + 100, 1e-6);
  // With one slot every message waits for the previous one to be received: a latency each.
  m.fifoSlots = 1;
  ASSERT_TRUE(simulatePlans(m, plans, 4, &shallow).ok());
  EXPECT_NEAR(shallow.timeUs, 8 * (0.4 + 100), 1e-6);
}

// Two lanes of rank 0 each send 10 one-element messages, to ranks 1 and 2.
std::vector<Plan> twoLanesOfTenSends() {
  std::vector<Step> a, b, ra, rb;
  for (int i = 0; i < 10; ++i) {
    a.push_back(sendStep(1, sendRef(i), 1));
    b.push_back(sendStep(2, sendRef(i), 1));
    ra.push_back(recvStep(0, recvRef(i), 1));
    rb.push_back(recvStep(0, recvRef(i), 1));
  }
  return {plan(3, 0, {a, b}), plan(3, 1, {ra}), plan(3, 2, {rb})};
}

TEST(PlanSimulator, RankEngineRunsOneStepAtATime) {
  // 20 steps of 0.5 us on one engine.
  const std::vector<Plan> plans = twoLanesOfTenSends();
  MachineModel m = machine(3);
  m.fifoSlots = 16;
  SimulationResult r;
  ASSERT_TRUE(simulatePlans(m, plans, 4, &r).ok());
  EXPECT_GE(r.timeUs, 20 * 0.5);
  EXPECT_GE(r.busiestUs, 20 * 0.5 - 1e-9);
}

TEST(PlanSimulator, LanesInParallelRunTheirStepsSideBySide) {
  // The same two lanes on a GPU's machine: each lane its own engine, so 10 steps of 0.5 us each side
  // by side (plus the hop), where one engine needs 20.
  const std::vector<Plan> plans = twoLanesOfTenSends();
  MachineModel m = machine(3);
  m.fifoSlots = 16;
  m.lanesInParallel = true;
  SimulationResult r;
  ASSERT_TRUE(simulatePlans(m, plans, 4, &r).ok());
  EXPECT_LT(r.timeUs, 20 * 0.5);
  EXPECT_GE(r.timeUs, 10 * 0.5);
  EXPECT_NEAR(r.busiestUs, 10 * 0.5, 1e-6);  // one lane's steps
  // Each lane copies at copyGbs (the sender's step, then the receiver's: 1000 us each for 1 MB at
  // 1 GB/s): rank 0's two sends side by side take about 2000 us where one engine takes 3000; the rank's
  // port (intraGbs) still caps their sum: at 0.5 GB/s its 2 MB take 4000 us.
  const std::vector<Plan> big = {
      plan(3, 0, {{sendStep(1, sendRef(0), 250000)}, {sendStep(2, sendRef(0), 250000)}}),
      plan(3, 1, {{recvStep(0, recvRef(0), 250000)}}), plan(3, 2, {{recvStep(0, recvRef(0), 250000)}})};
  m.copyGbs = 1;
  m.intraGbs = 100;
  ASSERT_TRUE(simulatePlans(m, big, 4, &r).ok());
  EXPECT_LT(r.timeUs, 2100);
  m.lanesInParallel = false;
  ASSERT_TRUE(simulatePlans(m, big, 4, &r).ok());
  EXPECT_GT(r.timeUs, 2900);
  m.lanesInParallel = true;
  m.intraGbs = 0.5;
  ASSERT_TRUE(simulatePlans(m, big, 4, &r).ok());
  EXPECT_GE(r.timeUs, 4000);
}

TEST(PlanSimulator, SharedPortsSerializeTransfers) {
  // Ranks 1 and 2 send 1 MB each to rank 0: its receiving port takes 2 x 100 us.
  const std::vector<Plan> plans = {
      plan(3, 0, {{recvStep(1, recvRef(0), 250000)}, {recvStep(2, recvRef(250000), 250000)}}),
      plan(3, 1, {{sendStep(0, sendRef(0), 250000)}}), plan(3, 2, {{sendStep(0, sendRef(0), 250000)}})};
  SimulationResult r;
  ASSERT_TRUE(simulatePlans(machine(3), plans, 4, &r).ok());
  EXPECT_GE(r.timeUs, 200);
  EXPECT_NEAR(r.busiestUs, 200, 1e-9);
}

TEST(PlanSimulator, SymmetricRunsMatchFullRuns) {
  for (int perNode : {0, 4}) {
    PlanRequest req;
    req.coll = Collective::AllReduce;
    req.nranks = 16;
    req.count = 16 * 4 * 50;
    req.elemSize = 4;
    req.chunkElems = 50;
    req.nchannels = 2;
    req.ranksPerNode = 4;
    for (Algorithm algo : {Algorithm::Ring, Algorithm::Hierarchical}) {
      if (algo == Algorithm::Hierarchical && perNode == 0) continue;  // its plans follow the nodes
      const MachineModel m = machine(16, perNode);
      const std::vector<Plan> all = allPlans(algo, req);
      SimulationResult full, quotient;
      ASSERT_TRUE(simulatePlans(m, all, 4, &full).ok());
      const int g = m.symmetryShift();
      ASSERT_LT(g, 16);
      const std::vector<Plan> reps(all.begin(), all.begin() + g);
      ASSERT_TRUE(simulatePlans(m, reps, 4, &quotient).ok());
      EXPECT_NEAR(quotient.timeUs, full.timeUs, 1e-6 * full.timeUs) << algorithmName(algo) << " perNode " << perNode;
    }
  }
}

TEST(PlanSimulator, ReportsPlansThatCannotComplete) {
  // Both ranks receive before sending.
  const std::vector<Plan> stuck = {plan(2, 0, {{recvStep(1, recvRef(0), 1), sendStep(1, sendRef(0), 1)}}),
                                   plan(2, 1, {{recvStep(0, recvRef(0), 1), sendStep(0, sendRef(0), 1)}})};
  SimulationResult r;
  Status st = simulatePlans(machine(2), stuck, 4, &r);
  EXPECT_EQ(st.code(), loomInternalError);
  EXPECT_NE(st.message().find("cannot complete"), std::string::npos) << st.message();
  // A message nobody receives.
  const std::vector<Plan> lost = {plan(2, 0, {{sendStep(1, sendRef(0), 1)}}), plan(2, 1, {})};
  st = simulatePlans(machine(2), lost, 4, &r);
  EXPECT_NE(st.message().find("never received"), std::string::npos) << st.message();
  // Plans that are not symmetric, run as if they were.
  PlanRequest req;
  req.coll = Collective::Broadcast;
  req.nranks = 4;
  req.count = 40;
  req.chunkElems = 8;
  const std::vector<Plan> all = allPlans(Algorithm::Ring, req);
  EXPECT_FALSE(simulatePlans(machine(4), {all[0]}, 4, &r).ok());
  EXPECT_EQ(simulatePlans(machine(4), {all[0], all[1], all[2]}, 4, &r).code(), loomInvalidArgument);
}

}  // namespace
}  // namespace loom
