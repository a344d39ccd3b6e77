// One-shot AllReduce: proven by the verifier for ranks 1..64 in both layouts, and checked to combine
// the contributions in rank order on every rank (what makes results bitwise identical across ranks).
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "algorithms/builders.h"
#include "algorithms/verifier.h"

namespace loom {
namespace {

PlanRequest oneShotRequest(int n, uint64_t count, uint64_t chunk, int channels) {
  PlanRequest req;
  req.coll = Collective::AllReduce;
  req.nranks = n;
  req.count = count;
  req.elemSize = 4;
  req.chunkElems = chunk;
  req.nchannels = channels;
  return req;
}

TEST(OneShot, VerifiesEveryShape) {
  for (int n : {1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 23, 32, 47, 64}) {
    std::set<uint64_t> counts = {0, 1, 2, 3, 13, static_cast<uint64_t>(n) + 1};
    if (n <= 16) counts.insert(97);
    for (uint64_t count : counts) {
      for (uint64_t chunk : {count, count + 5, uint64_t{1} << 40}) {
        if (chunk == 0) continue;
        for (int channels : {1, 3}) {
          const Status st = verifyAlgorithm(Algorithm::OneShot, oneShotRequest(n, count, chunk, channels));
          ASSERT_TRUE(st.ok()) << "n=" << n << " count=" << count << " chunk=" << chunk << " channels=" << channels
                               << ": " << st.message();
        }
      }
    }
  }
}

// Follows where each piece of data comes from through a rank's plan: which rank's contribution a
// scratch region holds, and the order in which contributions are combined into recv.
std::vector<int> combineOrder(const Plan& plan, uint64_t count) {
  std::vector<int> order;
  int ownRegion = -1, incomingRegion = -1;  // contributor held by scratch[0, count) and [count, 2 count)
  auto regionOf = [&](const BufRef& ref) -> int* {
    if (ref.buffer != kScratchBuffer) return nullptr;
    return ref.offset == 0 ? &ownRegion : &incomingRegion;
  };
  for (const Lane& lane : plan.lanes) {
    for (const Step& s : lane.steps) {
      switch (s.kind) {
        case StepKind::Copy:
          if (s.src.buffer == kSendBuffer && regionOf(s.dst)) *regionOf(s.dst) = plan.rank;
          if (s.dst.buffer == kRecvBuffer && regionOf(s.src)) order.push_back(*regionOf(s.src));
          break;
        case StepKind::Recv:
          if (s.dst.buffer == kRecvBuffer) order.push_back(s.recvPeer);
          else if (regionOf(s.dst)) *regionOf(s.dst) = s.recvPeer;
          break;
        case StepKind::Reduce:
          EXPECT_EQ(s.dst.buffer, kRecvBuffer);
          if (regionOf(s.src)) order.push_back(*regionOf(s.src));
          break;
        case StepKind::Send: break;
        default: ADD_FAILURE() << "unexpected step " << stepKindName(s.kind);
      }
      EXPECT_EQ(s.count, count);
    }
  }
  return order;
}

TEST(OneShot, CombinesInRankOrderOnEveryRank) {
  for (int n : {2, 3, 5, 8, 33}) {
    std::vector<int> expected(n);
    for (int r = 0; r < n; ++r) expected[r] = r;
    for (int r = 0; r < n; ++r) {
      PlanRequest req = oneShotRequest(n, 6, 6, 1);
      req.rank = r;
      Plan plan;
      ASSERT_TRUE(buildOneShotPlan(req, &plan).ok());
      EXPECT_EQ(plan.algorithm, "oneshot");
      EXPECT_EQ(plan.scratchElems, 12u);
      EXPECT_EQ(plan.nchannels, 1u);
      ASSERT_EQ(plan.lanes.size(), 1u);
      EXPECT_EQ(combineOrder(plan, 6), expected) << "rank " << r;
      // Only the last combination finalizes.
      int finalized = 0;
      for (const Step& s : plan.lanes[0].steps) finalized += s.finalize;
      EXPECT_EQ(finalized, 1);
      EXPECT_TRUE(plan.lanes[0].steps.back().finalize);
    }
  }
}

// Every peer gets the input once, staggered so that no rank is everybody's first target, and every
// send reads the private copy (never the user's buffer, which is the output in place).
TEST(OneShot, SendsOncePerPeerFromScratch) {
  const int n = 7;
  for (int r = 0; r < n; ++r) {
    PlanRequest req = oneShotRequest(n, 3, 3, 1);
    req.rank = r;
    Plan plan;
    ASSERT_TRUE(buildOneShotPlan(req, &plan).ok());
    std::vector<int> targets;
    for (const Step& s : plan.lanes[0].steps)
      if (s.kind == StepKind::Send) {
        targets.push_back(s.sendPeer);
        EXPECT_EQ(s.src.buffer, kScratchBuffer);
      }
    ASSERT_EQ(targets.size(), static_cast<size_t>(n - 1));
    EXPECT_EQ(targets.front(), (r + 1) % n);
    EXPECT_EQ(std::set<int>(targets.begin(), targets.end()).size(), static_cast<size_t>(n - 1));
  }
}

}  // namespace
}  // namespace loom
