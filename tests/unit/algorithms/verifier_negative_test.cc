// The verifier must reject broken plans: each test breaks one rule and checks the report names it.
#include <gtest/gtest.h>

#include <string>

#include "algorithms/build_helpers.h"
#include "algorithms/builders.h"
#include "algorithms/verifier.h"

namespace loom {
namespace {

using detail::copyStep;
using detail::reduceStep;
using detail::ref;
using detail::recvReduceStep;
using detail::recvRef;
using detail::recvStep;
using detail::sendRef;
using detail::sendStep;

PlanRequest chunkedRequest(Collective coll, int nranks, uint64_t count, uint64_t chunk = 4) {
  PlanRequest req;
  req.coll = coll;
  req.nranks = nranks;
  req.count = count;
  req.chunkElems = chunk;
  return req;
}

Plan handPlan(const PlanRequest& req, int rank, std::vector<std::vector<Step>> lanes) {
  Plan plan;
  PlanRequest rr = req;
  rr.rank = rank;
  detail::startPlan(rr, "hand", &plan);
  for (auto& steps : lanes) {
    Lane lane;
    lane.steps = std::move(steps);
    plan.lanes.push_back(std::move(lane));
  }
  detail::finishPlan(&plan);
  return plan;
}

// A correct one-shot AllReduce for two ranks: send everything, then reduce what arrives.
std::vector<Plan> twoRankAllReduce(const PlanRequest& req) {
  std::vector<Plan> plans;
  for (int r = 0; r < 2; ++r)
    plans.push_back(handPlan(req, r,
                             {{sendStep(1 - r, sendRef(0), req.count),
                               recvReduceStep(1 - r, sendRef(0), recvRef(0), req.count, true)}}));
  return plans;
}

std::vector<Plan> built(Algorithm algo, const PlanRequest& req) {
  std::vector<Plan> plans;
  EXPECT_TRUE(buildPlansForAllRanks(algo, req, &plans).ok());
  return plans;
}

void expectRejected(const PlanRequest& req, const std::vector<Plan>& plans, const std::string& words) {
  const Status st = verifyPlans(req, plans);
  EXPECT_FALSE(st.ok()) << "accepted a plan that should fail with '" << words << "'";
  EXPECT_NE(st.message().find(words), std::string::npos) << st.message();
}

TEST(VerifierRejects, NothingWhenCorrect) {
  const PlanRequest req = chunkedRequest(Collective::AllReduce, 2, 3);
  const Status st = verifyPlans(req, twoRankAllReduce(req));
  EXPECT_TRUE(st.ok()) << st.message();
}

TEST(VerifierRejects, MissingFinalize) {
  const PlanRequest req = chunkedRequest(Collective::AllReduce, 2, 3);
  auto plans = twoRankAllReduce(req);
  plans[1].lanes[0].steps[1].finalize = false;
  expectRejected(req, plans, "rank 1 recv[0] holds send[0] of rank(s) {0,1}, expected send[0] of rank(s) {0,1} finalized");
}

TEST(VerifierRejects, DuplicateReduce) {
  const PlanRequest req = chunkedRequest(Collective::AllReduce, 2, 3);
  auto plans = twoRankAllReduce(req);
  plans[0].lanes[0].steps.insert(plans[0].lanes[0].steps.begin(), sendStep(1, sendRef(0), 3));
  auto& steps = plans[1].lanes[0].steps;
  steps[1].finalize = false;
  steps.push_back(recvReduceStep(0, recvRef(0), recvRef(0), 3, true));
  expectRejected(req, plans, "rank 1 lane 0 step 2 (RecvReduce): recv[0] counts a contribution twice");
}

TEST(VerifierRejects, FinalizeTwice) {
  const PlanRequest req = chunkedRequest(Collective::AllReduce, 2, 3);
  auto plans = twoRankAllReduce(req);
  plans[1].lanes[0].steps.push_back(copyStep(recvRef(0), recvRef(0), 3, true));
  expectRejected(req, plans, "finalized twice");
}

TEST(VerifierRejects, PrematureFinalize) {
  const PlanRequest req = chunkedRequest(Collective::AllReduce, 3, 13, 3);
  auto plans = built(Algorithm::Ring, req);
  Step& first = plans[0].lanes[0].steps[1];  // a RecvReduceSend with 2 of 3 contributions
  ASSERT_EQ(first.kind, StepKind::RecvReduceSend);
  first.finalize = true;
  expectRejected(req, plans, "finalized with 2 of 3 contributions");
}

TEST(VerifierRejects, DroppedStep) {
  const PlanRequest req = chunkedRequest(Collective::AllReduce, 4, 13, 3);
  auto last = built(Algorithm::Ring, req);
  last[2].lanes[0].steps.pop_back();
  expectRejected(req, last, "that no step received");
  auto middle = built(Algorithm::Ring, req);
  auto& steps = middle[1].lanes[0].steps;
  steps.erase(steps.begin() + 2);
  EXPECT_FALSE(verifyPlans(req, middle).ok());
  auto gather = built(Algorithm::Direct, chunkedRequest(Collective::AllGather, 3, 5));
  gather[0].lanes.back().steps.pop_back();  // the local copy
  expectRejected(chunkedRequest(Collective::AllGather, 3, 5), gather, "rank 0 recv[0] holds nothing");
}

TEST(VerifierRejects, Deadlock) {
  const PlanRequest req = chunkedRequest(Collective::AllReduce, 2, 3);
  auto plans = twoRankAllReduce(req);
  for (Plan& plan : plans) std::swap(plan.lanes[0].steps[0], plan.lanes[0].steps[1]);
  expectRejected(req, plans, "deadlock");
  // Three messages each way before either side receives: two FIFO slots are not enough.
  const PlanRequest small = chunkedRequest(Collective::AllGather, 2, 3, 1);
  std::vector<Plan> bounded;
  for (int r = 0; r < 2; ++r) {
    std::vector<Step> steps = {copyStep(sendRef(0), recvRef(r * 3), 3, false)};
    for (uint64_t i = 0; i < 3; ++i) steps.push_back(sendStep(1 - r, sendRef(i), 1));
    for (uint64_t i = 0; i < 3; ++i) steps.push_back(recvStep(1 - r, recvRef((1 - r) * 3 + i), 1));
    bounded.push_back(handPlan(small, r, {steps}));
  }
  expectRejected(small, bounded, "deadlock: waits for a free slot towards rank");
}

TEST(VerifierRejects, MessageSizeMismatch) {
  const PlanRequest req = chunkedRequest(Collective::AllReduce, 2, 2);
  auto plans = twoRankAllReduce(req);
  plans[1].lanes[0].steps = {sendStep(0, sendRef(0), 2), recvReduceStep(0, sendRef(0), recvRef(0), 1, true),
                             recvReduceStep(0, sendRef(1), recvRef(1), 1, true)};
  expectRejected(req, plans, "receives 1 element(s) from rank 0 but rank 0 lane 0 step 0 sent 2");
}

TEST(VerifierRejects, WriteToSendBuffer) {
  const PlanRequest req = chunkedRequest(Collective::AllReduce, 2, 3);
  auto plans = twoRankAllReduce(req);
  plans[1].lanes[0].steps[1].dst = sendRef(0);
  expectRejected(req, plans, "writes send[0..3), which is read-only input");
}

TEST(VerifierRejects, ReadBeforeWrite) {
  const PlanRequest req = chunkedRequest(Collective::AllReduce, 2, 3);
  auto plans = twoRankAllReduce(req);
  plans[0].lanes[0].steps[0].src = recvRef(0);
  expectRejected(req, plans, "rank 0 lane 0 step 0 (Send): reads recv[0] before anything was written");
}

TEST(VerifierRejects, RootOnlyBufferOnOtherRank) {
  PlanRequest req = chunkedRequest(Collective::Broadcast, 2, 3);
  auto plans = built(Algorithm::Ring, req);
  plans[1].lanes[0].steps.push_back(copyStep(sendRef(0), recvRef(0), 3, false));
  expectRejected(req, plans, "rank 1 lane 0 step 1 (Copy): source names buffer 0, which this rank does not have");
}

TEST(VerifierRejects, LanesTouchingTheSameElements) {
  const PlanRequest req = chunkedRequest(Collective::AllReduce, 1, 4);
  std::vector<Plan> plans = {handPlan(req, 0, {{copyStep(sendRef(0), recvRef(0), 4, true)},
                                               {copyStep(sendRef(0), recvRef(0), 4, true)}})};
  expectRejected(req, plans, "lanes of a rank are unordered");
}

TEST(VerifierRejects, TwoLanesOnOneConnection) {
  const PlanRequest req = chunkedRequest(Collective::AllReduce, 2, 4);
  auto plans = twoRankAllReduce(req);
  plans[0] = handPlan(req, 0, {{sendStep(1, sendRef(0), 2)}, {sendStep(1, sendRef(2), 2)}});
  expectRejected(req, plans, "a connection lane 0 also uses");
}

TEST(VerifierRejects, InPlaceHazard) {
  // Rank 1 overwrites its output before sending its input: fine out of place, wrong when send == recv.
  const PlanRequest req = chunkedRequest(Collective::AllReduce, 2, 3);
  auto plans = twoRankAllReduce(req);
  std::swap(plans[1].lanes[0].steps[0], plans[1].lanes[0].steps[1]);
  EXPECT_TRUE(verifyPlansInLayout(req, plans, false).ok());
  expectRejected(req, plans, "in-place: rank 0 lane 0 step 1 (RecvReduce): recv[0] reduces an already finalized");
}

TEST(VerifierRejects, OversizedMessages) {
  auto plans = built(Algorithm::Ring, chunkedRequest(Collective::AllGather, 3, 20, 8));
  expectRejected(chunkedRequest(Collective::AllGather, 3, 20, 4), plans, "exceeds chunkElems 4");
  auto wrongMax = built(Algorithm::Ring, chunkedRequest(Collective::AllGather, 3, 20, 8));
  wrongMax[1].maxMessageElems = 100;
  expectRejected(chunkedRequest(Collective::AllGather, 3, 20, 8), wrongMax, "maxMessageElems is 100");
}

TEST(VerifierRejects, MalformedSteps) {
  const PlanRequest req = chunkedRequest(Collective::AllReduce, 2, 3);
  auto self = twoRankAllReduce(req);
  self[0].lanes[0].steps[0].sendPeer = 0;
  expectRejected(req, self, "sends to itself");
  auto stray = twoRankAllReduce(req);
  stray[1].lanes[0].steps[1].sendPeer = 0;  // the executor would wait for a slot towards rank 0
  expectRejected(req, stray, "names sendPeer 0 but does not send");
  PlanRequest wide = chunkedRequest(Collective::AllReduce, 2, 30);
  wide.nchannels = 3;
  auto plans = built(Algorithm::Ring, wide);
  wide.nchannels = 2;
  expectRejected(wide, plans, "plan uses 3 channels but the request allows 2");
  auto empty = twoRankAllReduce(req);
  empty[0].lanes[0].steps.push_back(copyStep(sendRef(0), recvRef(0), 0, false));
  expectRejected(req, empty, "empty step");
  const PlanRequest gather = chunkedRequest(Collective::AllGather, 2, 3);
  auto reducing = built(Algorithm::Direct, gather);
  reducing[0].lanes[0].steps[0].finalize = true;
  expectRejected(gather, reducing, "finalize on a step");
  // Rank 0 stores rank 1's block where rank 2's belongs and vice versa.
  const PlanRequest gather3 = chunkedRequest(Collective::AllGather, 3, 3);
  auto misplaced = built(Algorithm::Direct, gather3);
  for (Lane& lane : misplaced[0].lanes)
    for (Step& step : lane.steps)
      if (step.kind == StepKind::Recv) step.dst.offset = step.recvPeer == 1 ? 6 : 3;
  expectRejected(gather3, misplaced, "rank 0 recv[3] holds send[0] of rank(s) {2}, expected send[0] of rank(s) {1}");
}

// A one-shot style AllReduce over local Reduce steps: receive the peer's vector, combine it into
// the output. Correct as built; each test below breaks one rule of the Reduce step.
std::vector<Plan> twoRankLocalReduce(const PlanRequest& req) {
  std::vector<Plan> plans;
  for (int r = 0; r < 2; ++r) {
    Plan plan = handPlan(req, r,
                         {{copyStep(sendRef(0), ref(kScratchBuffer, 0), req.count, false),
                           sendStep(1 - r, ref(kScratchBuffer, 0), req.count),
                           recvStep(1 - r, recvRef(0), req.count),
                           reduceStep(ref(kScratchBuffer, 0), recvRef(0), req.count, true)}});
    plan.scratchElems = req.count;
    plans.push_back(std::move(plan));
  }
  return plans;
}

TEST(VerifierRejects, NothingWhenLocalReduceIsCorrect) {
  const PlanRequest req = chunkedRequest(Collective::AllReduce, 2, 3);
  const Status st = verifyPlans(req, twoRankLocalReduce(req));
  EXPECT_TRUE(st.ok()) << st.message();
}

TEST(VerifierRejects, LocalReduceIntoNothing) {
  const PlanRequest req = chunkedRequest(Collective::AllReduce, 2, 3);
  auto plans = twoRankLocalReduce(req);
  plans[0].lanes[0].steps.erase(plans[0].lanes[0].steps.begin() + 2);  // the receive into recv
  plans[1].lanes[0].steps.erase(plans[1].lanes[0].steps.begin() + 1);  // and its send
  expectRejected(req, plans, "rank 0 lane 0 step 2 (Reduce): reads recv[0] before anything was written");
}

TEST(VerifierRejects, LocalReduceWithItself) {
  const PlanRequest req = chunkedRequest(Collective::AllReduce, 2, 3);
  auto plans = twoRankLocalReduce(req);
  plans[1].lanes[0].steps[3].src = recvRef(0);
  expectRejected(req, plans, "rank 1 lane 0 step 3 (Reduce): reduces elements with themselves");
  auto overlap = twoRankLocalReduce(req);
  overlap[1].lanes[0].steps[3].src = recvRef(1);
  overlap[1].lanes[0].steps[3].count = 2;
  expectRejected(req, overlap, "overlap");
}

TEST(VerifierRejects, LocalReduceCountingTwice) {
  const PlanRequest req = chunkedRequest(Collective::AllReduce, 2, 3);
  auto plans = twoRankLocalReduce(req);
  auto& steps = plans[0].lanes[0].steps;
  steps[3].finalize = false;
  steps.push_back(reduceStep(ref(kScratchBuffer, 0), recvRef(0), 3, true));
  expectRejected(req, plans, "rank 0 lane 0 step 4 (Reduce): recv[0] counts a contribution twice");
}

TEST(VerifierRejects, LocalReduceOutsideReductions) {
  const PlanRequest req = chunkedRequest(Collective::AllGather, 2, 3);
  auto plans = built(Algorithm::Ring, req);
  plans[0].lanes[0].steps.push_back(reduceStep(sendRef(0), recvRef(0), 3, false));
  expectRejected(req, plans, "reduces in a collective without reduction");
}

}  // namespace
}  // namespace loom
