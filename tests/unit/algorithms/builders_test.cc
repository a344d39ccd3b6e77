// Builder contract: names, buffer sizes, argument validation and the shape of trivial plans.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "algorithms/builders.h"
#include "algorithms/verifier.h"

namespace loom {
namespace {

const Collective kCollectives[] = {Collective::AllReduce, Collective::Broadcast,     Collective::Reduce,
                                   Collective::AllGather, Collective::ReduceScatter, Collective::AlltoAll,
                                   Collective::Gather,    Collective::Scatter};

PlanRequest request(Collective coll, int nranks, int rank, uint64_t count) {
  PlanRequest req;
  req.coll = coll;
  req.nranks = nranks;
  req.rank = rank;
  req.count = count;
  req.chunkElems = 4;
  return req;
}

TEST(Names, AreDistinct) {
  std::set<std::string> names;
  for (Collective c : kCollectives) names.insert(collectiveName(c));
  names.insert(collectiveName(Collective::SendRecv));
  EXPECT_EQ(names.size(), 9u);
  EXPECT_STREQ(collectiveName(Collective::AllReduce), "AllReduce");
  EXPECT_STREQ(stepKindName(StepKind::RecvReduceSend), "RecvReduceSend");
  EXPECT_STREQ(stepKindName(StepKind::Copy), "Copy");
  EXPECT_STREQ(algorithmName(Algorithm::Ring), "ring");
  EXPECT_STREQ(algorithmName(Algorithm::Direct), "direct");
  EXPECT_STREQ(algorithmName(Algorithm::Tree), "tree");
  EXPECT_STREQ(algorithmName(Algorithm::Hierarchical), "hier");
  EXPECT_STREQ(algorithmName(Algorithm::OneShot), "oneshot");
  EXPECT_STREQ(stepKindName(StepKind::Reduce), "Reduce");
  for (Algorithm a : kAllAlgorithms) {
    Algorithm parsed = Algorithm::Ring;
    EXPECT_TRUE(parseAlgorithmName(algorithmName(a), &parsed));
    EXPECT_EQ(parsed, a);
  }
  Algorithm parsed = Algorithm::Ring;
  EXPECT_FALSE(parseAlgorithmName("rings", &parsed));
  EXPECT_FALSE(parseAlgorithmName("", &parsed));
}

// Existing values must not move: they are part of plan cache keys and traces.
TEST(Names, EnumValuesAreStable) {
  EXPECT_EQ(static_cast<int>(StepKind::Copy), 5);
  EXPECT_EQ(static_cast<int>(StepKind::Reduce), 6);
  EXPECT_EQ(static_cast<int>(Algorithm::Hierarchical), 3);
  EXPECT_EQ(static_cast<int>(Algorithm::OneShot), 4);
}

TEST(BufferSizes, FollowNccl) {
  struct Row {
    Collective coll;
    uint64_t sendRoot, recvRoot, sendOther, recvOther;
  };
  const uint64_t c = 10, n = 4;
  const Row rows[] = {
      {Collective::AllReduce, c, c, c, c},         {Collective::Broadcast, c, c, 0, c},
      {Collective::Reduce, c, c, c, 0},            {Collective::AllGather, c, n * c, c, n * c},
      {Collective::ReduceScatter, n * c, c, n * c, c}, {Collective::AlltoAll, n * c, n * c, n * c, n * c},
      {Collective::Gather, c, n * c, c, 0},        {Collective::Scatter, n * c, c, 0, c},
  };
  for (const Row& row : rows) {
    PlanRequest req = request(row.coll, 4, 2, c);
    req.root = 2;
    EXPECT_EQ(sendBufferElems(req), row.sendRoot) << collectiveName(row.coll);
    EXPECT_EQ(recvBufferElems(req), row.recvRoot) << collectiveName(row.coll);
    req.root = 1;
    EXPECT_EQ(sendBufferElems(req), row.sendOther) << collectiveName(row.coll);
    EXPECT_EQ(recvBufferElems(req), row.recvOther) << collectiveName(row.coll);
  }
}

TEST(Validation, RejectsBadRequests) {
  for (Algorithm algo : {Algorithm::Ring, Algorithm::Direct}) {
    Plan plan;
    PlanRequest req = request(Collective::Broadcast, 4, 1, 8);
    auto expectInvalid = [&](const PlanRequest& r, const char* words) {
      const Status st = buildPlan(algo, r, &plan);
      EXPECT_EQ(st.code(), loomInvalidArgument) << words;
      EXPECT_NE(st.message().find(words), std::string::npos) << st.message();
    };
    PlanRequest bad = req;
    bad.nranks = 0;
    expectInvalid(bad, "nranks");
    bad = req;
    bad.rank = 4;
    expectInvalid(bad, "rank 4");
    bad = req;
    bad.root = -1;
    expectInvalid(bad, "root");
    bad = req;
    bad.chunkElems = 0;
    expectInvalid(bad, "chunkElems");
    bad = req;
    bad.nchannels = 0;
    expectInvalid(bad, "nchannels");
    bad = req;
    bad.rings = {{0, 1, 2}};
    expectInvalid(bad, "ring 0 has 3 entries");
    bad = req;
    bad.rings = {{0, 1, 2, 3}, {0, 1, 1, 3}};
    expectInvalid(bad, "ring 1 names rank 1 twice");
    bad = req;
    bad.rings = {{0, 1, 2, 7}};
    expectInvalid(bad, "out of range");
    bad = req;
    bad.count = ~uint64_t{0} / 2;
    bad.coll = Collective::AlltoAll;
    expectInvalid(bad, "overflows");
    bad = req;
    bad.coll = Collective::SendRecv;
    expectInvalid(bad, "buildP2pPlan");
  }
  // Algorithms that serve only some collectives or shapes say so.
  Plan plan;
  for (Collective coll : {Collective::AllGather, Collective::ReduceScatter, Collective::AlltoAll, Collective::Gather,
                          Collective::Scatter})
    EXPECT_EQ(buildPlan(Algorithm::Tree, request(coll, 4, 0, 8), &plan).code(), loomInvalidArgument);
  for (Collective coll : {Collective::Broadcast, Collective::Reduce, Collective::AllGather}) {
    PlanRequest req = request(coll, 4, 0, 8);
    req.ranksPerNode = 2;
    EXPECT_EQ(buildPlan(Algorithm::Hierarchical, req, &plan).code(), loomInvalidArgument);
    EXPECT_EQ(buildPlan(Algorithm::OneShot, req, &plan).code(), loomInvalidArgument);
  }
  // Hierarchical plans need the node shape; without it (ranksPerNode 0) the request is refused.
  PlanRequest hier = request(Collective::AllReduce, 6, 0, 8);
  for (int rpn : {0, 4, 7}) {
    hier.ranksPerNode = rpn;
    const Status st = buildPlan(Algorithm::Hierarchical, hier, &plan);
    EXPECT_EQ(st.code(), loomInvalidArgument) << rpn;
    EXPECT_NE(st.message().find("ranksPerNode"), std::string::npos) << st.message();
  }
  // One-shot plans are for one message per peer.
  PlanRequest big = request(Collective::AllReduce, 4, 0, 9);
  big.chunkElems = 8;
  const Status st = buildPlan(Algorithm::OneShot, big, &plan);
  EXPECT_EQ(st.code(), loomInvalidArgument);
  EXPECT_NE(st.message().find("small messages"), std::string::npos) << st.message();
}

TEST(Plans, CountZeroHasNoSteps) {
  for (Algorithm algo : {Algorithm::Ring, Algorithm::Direct}) {
    for (Collective coll : kCollectives) {
      for (int n : {1, 2, 5}) {
        for (int r = 0; r < n; ++r) {
          Plan plan;
          PlanRequest req = request(coll, n, r, 0);
          req.nchannels = 3;
          ASSERT_TRUE(buildPlan(algo, req, &plan).ok());
          EXPECT_TRUE(plan.lanes.empty());
          EXPECT_EQ(plan.maxMessageElems, 0u);
          EXPECT_EQ(plan.coll, coll);
          EXPECT_EQ(plan.rank, r);
          EXPECT_EQ(plan.nranks, n);
        }
      }
    }
  }
}

TEST(Plans, SingleRankIsOneLocalCopy) {
  for (Algorithm algo : {Algorithm::Ring, Algorithm::Direct}) {
    for (Collective coll : kCollectives) {
      Plan plan;
      PlanRequest req = request(coll, 1, 0, 7);
      req.nchannels = 2;
      ASSERT_TRUE(buildPlan(algo, req, &plan).ok());
      ASSERT_EQ(plan.lanes.size(), 1u);
      ASSERT_EQ(plan.lanes[0].steps.size(), 1u);
      const Step& step = plan.lanes[0].steps[0];
      EXPECT_EQ(step.kind, StepKind::Copy);
      EXPECT_EQ(step.count, 7u);
      const bool reduction =
          coll == Collective::AllReduce || coll == Collective::Reduce || coll == Collective::ReduceScatter;
      EXPECT_EQ(step.finalize, reduction) << collectiveName(coll);
      EXPECT_EQ(plan.maxMessageElems, 0u);
    }
  }
}

TEST(Plans, MessagesRespectChunkAndChannels) {
  for (Algorithm algo : {Algorithm::Ring, Algorithm::Direct}) {
    for (Collective coll : kCollectives) {
      for (int r = 0; r < 5; ++r) {
        Plan plan;
        PlanRequest req = request(coll, 5, r, 1000);
        req.chunkElems = 7;
        req.nchannels = 3;
        ASSERT_TRUE(buildPlan(algo, req, &plan).ok());
        EXPECT_GT(plan.maxMessageElems, 0u);
        EXPECT_LE(plan.maxMessageElems, 7u);
        for (const Lane& lane : plan.lanes) {
          EXPECT_LT(lane.channel, plan.nchannels);
          EXPECT_FALSE(lane.steps.empty());
        }
      }
    }
  }
}

TEST(Plans, RingUsesOneLanePerChannelAndItsRing) {
  PlanRequest req = request(Collective::AllReduce, 4, 2, 100);
  req.nchannels = 2;
  req.rings = {{0, 1, 2, 3}, {3, 2, 1, 0}};
  Plan plan;
  ASSERT_TRUE(buildRingPlan(req, &plan).ok());
  EXPECT_EQ(plan.algorithm, "ring");
  ASSERT_EQ(plan.lanes.size(), 2u);
  EXPECT_EQ(plan.nchannels, 2u);
  EXPECT_EQ(plan.lanes[0].steps.front().sendPeer, 3);  // next of 2 in 0,1,2,3
  EXPECT_EQ(plan.lanes[1].steps.front().sendPeer, 1);  // next of 2 in 3,2,1,0
}

TEST(Plans, RingFallsBackToDirectForPersonalizedCollectives) {
  for (Collective coll : {Collective::AlltoAll, Collective::Gather, Collective::Scatter}) {
    Plan plan;
    ASSERT_TRUE(buildRingPlan(request(coll, 4, 0, 9), &plan).ok());
    EXPECT_EQ(plan.algorithm, "direct");
  }
}

TEST(Plans, TinyCountsLeaveChannelsEmpty) {
  PlanRequest req = request(Collective::AllGather, 3, 0, 1);
  req.nchannels = 3;
  Plan plan;
  ASSERT_TRUE(buildRingPlan(req, &plan).ok());
  EXPECT_EQ(plan.lanes.size(), 1u);
  EXPECT_EQ(plan.nchannels, 1u);
  EXPECT_TRUE(verifyAlgorithm(Algorithm::Ring, req).ok());
}

}  // namespace
}  // namespace loom
