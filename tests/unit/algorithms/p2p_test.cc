// Point-to-point plans: argument checks, lane shape, and verified groups (rings, all-pairs, self).
#include <gtest/gtest.h>

#include <random>

#include "algorithms/builders.h"
#include "algorithms/point_to_point_model.h"
#include "algorithms/verifier.h"

namespace loom {
namespace {

P2pOp send(int peer, uint64_t count) { return P2pOp{true, peer, count}; }
P2pOp recv(int peer, uint64_t count) { return P2pOp{false, peer, count}; }

TEST(P2p, RejectsBadPeersAndSelfMismatch) {
  Plan plan;
  Status st = buildP2pPlan(4, 1, {send(4, 3)}, 8, &plan);
  EXPECT_EQ(st.code(), loomInvalidArgument);
  EXPECT_NE(st.message().find("peer 4"), std::string::npos) << st.message();
  EXPECT_EQ(buildP2pPlan(4, 1, {recv(-1, 3)}, 8, &plan).code(), loomInvalidArgument);
  st = buildP2pPlan(4, 1, {send(1, 3)}, 8, &plan);
  EXPECT_EQ(st.code(), loomInvalidArgument);
  EXPECT_NE(st.message().find("itself"), std::string::npos) << st.message();
  st = buildP2pPlan(4, 1, {send(1, 3), recv(1, 4)}, 8, &plan);
  EXPECT_EQ(st.code(), loomInvalidArgument);
  EXPECT_NE(st.message().find("receives 4"), std::string::npos) << st.message();
  EXPECT_EQ(buildP2pPlan(4, 5, {}, 8, &plan).code(), loomInvalidArgument);
  EXPECT_EQ(buildP2pPlan(4, 0, {}, 0, &plan).code(), loomInvalidArgument);
}

TEST(P2p, OneLanePerPeerAndDirection) {
  Plan plan;
  const std::vector<P2pOp> ops = {send(2, 10), recv(2, 5), send(3, 1), send(2, 4), recv(3, 0), send(1, 6), recv(1, 6)};
  ASSERT_TRUE(buildP2pPlan(4, 1, ops, 4, &plan).ok());
  EXPECT_EQ(plan.coll, Collective::SendRecv);
  EXPECT_EQ(plan.algorithm, "p2p");
  EXPECT_EQ(plan.maxMessageElems, 4u);
  EXPECT_EQ(plan.nchannels, 1u);
  // send to 2 (10 -> 4,3,3 then 4), recv from 2 (5 -> 3,2), send to 3, self copy; recv(3, 0) moves nothing.
  ASSERT_EQ(plan.lanes.size(), 4u);
  const Lane& toTwo = plan.lanes[0];
  ASSERT_EQ(toTwo.steps.size(), 4u);
  EXPECT_EQ(toTwo.steps[0].src.buffer, kFirstP2pBuffer + 0);
  EXPECT_EQ(toTwo.steps[3].src.buffer, kFirstP2pBuffer + 3);
  EXPECT_EQ(toTwo.steps[3].count, 4u);
  const Lane& self = plan.lanes[3];
  ASSERT_EQ(self.steps.size(), 1u);
  EXPECT_EQ(self.steps[0].kind, StepKind::Copy);
  EXPECT_EQ(self.steps[0].src.buffer, kFirstP2pBuffer + 5);
  EXPECT_EQ(self.steps[0].dst.buffer, kFirstP2pBuffer + 6);
  for (const Lane& lane : plan.lanes) EXPECT_EQ(lane.channel, 0u);
}

TEST(P2p, RingExchangeVerifies) {
  for (int n = 1; n <= 9; ++n) {
    std::vector<std::vector<P2pOp>> ops(n);
    for (int r = 0; r < n; ++r) ops[r] = {send((r + 1) % n, 37), recv((r + n - 1) % n, 37)};
    for (uint64_t chunk : {1, 3, 64}) {
      const Status st = verifyP2p(n, ops, chunk);
      EXPECT_TRUE(st.ok()) << "n=" << n << " chunk=" << chunk << ": " << st.message();
    }
  }
}

// Random groups: every ordered pair exchanges a few messages of random size (0 included), and each
// rank issues its operations in a random order that keeps each pair's order.
TEST(P2p, RandomAllPairsGroupsVerify) {
  std::mt19937 rng(1234);
  for (int n : {1, 2, 3, 4, 5, 7, 8, 13, 32}) {
    for (int trial = 0; trial < 4; ++trial) {
      std::vector<std::vector<P2pOp>> sends(n), recvs(n);
      for (int a = 0; a < n; ++a) {
        for (int b = 0; b < n; ++b) {
          const int messages = static_cast<int>(rng() % 3);
          for (int k = 0; k < messages; ++k) {
            const uint64_t count = rng() % 4 == 0 ? 0 : rng() % 50;
            sends[a].push_back(send(b, count));
            recvs[b].push_back(recv(a, count));
          }
        }
      }
      std::vector<std::vector<P2pOp>> ops(n);
      for (int r = 0; r < n; ++r) {
        size_t i = 0, j = 0;
        while (i < sends[r].size() || j < recvs[r].size()) {
          const bool takeSend = j == recvs[r].size() || (i < sends[r].size() && rng() % 2 == 0);
          ops[r].push_back(takeSend ? sends[r][i++] : recvs[r][j++]);
        }
      }
      for (uint64_t chunk : {1, 3, 64}) {
        const Status st = verifyP2p(n, ops, chunk);
        ASSERT_TRUE(st.ok()) << "n=" << n << " trial=" << trial << " chunk=" << chunk << ": " << st.message();
      }
    }
  }
}

TEST(P2p, VerifierCatchesUnpairedGroups) {
  // Rank 0 sends 5 elements, rank 1 expects 6: the groups do not pair up.
  const Status st = verifyP2p(2, {{send(1, 5)}, {recv(0, 6)}}, 4);
  EXPECT_EQ(st.code(), loomInvalidArgument);
  // Plans built from pairable groups but run against other plans fail in the machine.
  std::vector<Plan> plans;
  ASSERT_TRUE(buildP2pPlansForAllRanks(2, {{send(1, 5)}, {recv(0, 5)}}, 4, &plans).ok());
  Plan other;
  ASSERT_TRUE(buildP2pPlan(2, 1, {recv(0, 5)}, 2, &other).ok());
  plans[1] = other;
  const Status mismatch = verifyP2pPlans(2, {{send(1, 5)}, {recv(0, 5)}}, 4, plans);
  EXPECT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.message().find("sent"), std::string::npos) << mismatch.message();
}

// The point-to-point time model (point_to_point_model.h): the farthest peer's latency, the busiest
// direction and path, the CPU's copies and a step per message.
TEST(PointToPointModel, TimesTheBusiestSide) {
  MachineModel m;
  m.nranks = 4;
  m.ranksPerNode = 2;  // ranks 0,1 | 2,3
  m.intraGbs = 10, m.intraLatencyUs = 1, m.nicGbs = 5, m.nicsPerNode = 1, m.netLatencyUs = 10, m.stepUs = 0.5;
  m.copyGbs = 0;
  const uint64_t mb = 1000000;  // 1 MB: 100 us at 10 GB/s
  const std::vector<P2pOp> intra = {{true, 1, mb}, {false, 1, mb}};
  EXPECT_DOUBLE_EQ(predictPointToPointUs(m, 0, intra, 1, mb), 1 + 100 + 2 * 0.5);
  // Across nodes: two ranks share the node's NIC (2.5 GB/s each), the network's latency.
  const std::vector<P2pOp> across = {{true, 2, mb}};
  EXPECT_DOUBLE_EQ(predictPointToPointUs(m, 0, across, 1, mb), 10 + 400 + 0.5);
  // Both together: the slower path decides, and the farther latency.
  std::vector<P2pOp> both = intra;
  both.push_back({true, 3, mb});
  EXPECT_DOUBLE_EQ(predictPointToPointUs(m, 0, both, 1, mb), 10 + 400 + 3 * 0.5);
  // Messages are cut at the chunk; elements count by their size; the CPU copies every byte.
  EXPECT_DOUBLE_EQ(predictPointToPointUs(m, 0, {{{true, 1, mb / 4}}}, 4, mb / 4), 1 + 100 + 4 * 0.5);
  m.copyGbs = 20;
  EXPECT_DOUBLE_EQ(predictPointToPointUs(m, 0, intra, 1, mb), 1 + 100 + 100 + 2 * 0.5);
  // To itself: a copy, no latency.
  EXPECT_DOUBLE_EQ(predictPointToPointUs(m, 0, {{{true, 0, mb}, {false, 0, mb}}}, 1, mb), 100 + 2 * 0.5);
  EXPECT_EQ(predictPointToPointUs(m, 0, {}, 1, mb), 0.0);
}

}  // namespace
}  // namespace loom
