// One-shot AllReduce for small messages: every rank sends its whole vector to every peer and combines
// all n contributions itself, in rank order (acc = x0; acc = acc op x1; ...; acc op x(n-1), finalized),
// so every rank computes the same floating-point operations on the same operands and all ranks get
// bitwise identical results. One hop of latency, n-1 messages out and in per rank.
//
// One lane on channel 0: copy the input to scratch (the own contribution must survive the output being
// written in place, and the sends read a private copy), send it to every peer (staggered, r+1, r+2, ...
// so that no rank is everybody's first target), then receive and combine in rank order. The receives
// only start after all sends have left, so one FIFO slot per connection suffices.
#include "algorithms/build_helpers.h"
#include "algorithms/builders.h"

namespace loom {

Status buildOneShotPlan(const PlanRequest& req, Plan* plan) {
  LOOM_TRY(detail::validateRequest(req));
  if (req.coll != Collective::AllReduce)
    return invalidArgument("oneshot: {} has no one-shot plan (AllReduce does)", collectiveName(req.coll));
  if (req.count > req.chunkElems)
    return invalidArgument("oneshot: count {} exceeds one message ({} elements); one-shot is for small messages",
                           req.count, req.chunkElems);
  if (req.nranks == 1) {
    detail::buildSingleRankPlan(req, "oneshot", plan);
    return Status::Ok();
  }
  detail::startPlan(req, "oneshot", plan);
  const int n = req.nranks;
  const int r = req.rank;
  const uint64_t count = req.count;
  if (count > 0) {
    // scratch[0, count): this rank's contribution; scratch[count, 2 count): the peer being combined.
    plan->scratchElems = 2 * count;
    const BufRef own = detail::ref(kScratchBuffer, 0);
    const BufRef incoming = detail::ref(kScratchBuffer, count);
    Lane lane;
    lane.steps.push_back(detail::copyStep(detail::sendRef(0), own, count, false));
    for (int i = 1; i < n; ++i) lane.steps.push_back(detail::sendStep((r + i) % n, own, count));
    for (int j = 0; j < n; ++j) {
      const bool last = j == n - 1;
      if (j == 0) {
        lane.steps.push_back(r == 0 ? detail::copyStep(own, detail::recvRef(0), count, false)
                                    : detail::recvStep(0, detail::recvRef(0), count));
      } else if (j == r) {
        lane.steps.push_back(detail::reduceStep(own, detail::recvRef(0), count, last));
      } else {
        lane.steps.push_back(detail::recvStep(j, incoming, count));
        lane.steps.push_back(detail::reduceStep(incoming, detail::recvRef(0), count, last));
      }
    }
    plan->lanes.push_back(std::move(lane));
  }
  detail::finishPlan(plan);
  return Status::Ok();
}

}  // namespace loom
