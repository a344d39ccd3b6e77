// Peer-memory plans: for ranks that can read and write each other's buffers (device plan kernels of
// rank threads on one GPU; of rank processes on one GPU, on buffers in windows), a collective needs no
// messages: each rank reads its peers' inputs or writes
// into their outputs, and the only handshakes are two Meets per lane (plan.h), one when every rank's
// buffers are ready (the kernels have started), one when nobody touches a peer's memory any more.
//
// - peer-oneshot (AllReduce, small sizes): every rank reduces every rank's whole input, in rank order
//   (one_shot.cc's order, so the results have the same bits as its plans), into its scratch; after
//   the second Meet (no peer reads its input any more: in place, the input is the output) it copies
//   the result out. One read of n inputs, no second hop.
// - peer (AllReduce two-shot, ReduceScatter, AllGather, Broadcast): rank r reduces block r of every
//   rank's input (rank order again) and stores the result straight into block r of every rank's
//   output (AllReduce), or into its own output (ReduceScatter); AllGather stores its input into its
//   block of every rank's output; Broadcast's ranks read the root's input. In place is safe without
//   scratch: block r of any rank's buffer is read and written by rank r alone.
//
// Each channel is a lane over its part of the data (16-byte grains, as the other builders cut), and
// every lane has its two Meets even where its part is empty, so that all ranks' lanes of a channel
// meet the same number of times.
#include "algorithms/build_helpers.h"
#include "algorithms/builders.h"

namespace loom {
namespace {

BufRef onRank(BufRef r, int32_t rank) {
  r.rank = rank;
  return r;
}

Step meetStep() {
  Step s;
  s.kind = StepKind::Meet;
  return s;
}

Step reduceRanksStep(BufRef src, BufRef dst, uint64_t count) {
  Step s;
  s.kind = StepKind::ReduceRanks;
  s.src = onRank(src, kEveryRank);
  s.dst = dst;
  s.count = count;
  s.finalize = true;  // the step combines every rank's contribution: its result is complete
  return s;
}

Status checkPeerRequest(const PlanRequest& req, const char* name) {
  LOOM_TRY(detail::validateRequest(req));
  if (!req.peerMemory)
    return invalidArgument("{}: needs ranks that can address each other's buffers (device plan kernels of rank "
                           "threads on one GPU, or of rank processes on one GPU on buffers in windows)",
                           name);
  if (req.nranks > kMaxPeerMemoryRanks)
    return invalidArgument("{}: {} ranks; peer-memory plans serve at most {}", name, req.nranks, kMaxPeerMemoryRanks);
  return Status::Ok();
}

// One lane per channel: Meet, the channel's part of `body`, Meet, then `after` (steps that touch this
// rank's memory only).
template <class Body>
void addLanes(const PlanRequest& req, uint64_t total, Plan* plan, Body&& body) {
  const detail::Split split = detail::splitFor(req);
  const uint32_t channels = static_cast<uint32_t>(std::max(1, req.nchannels));
  for (uint32_t c = 0; c < channels; ++c) {
    Lane lane;
    lane.channel = c;
    lane.steps.push_back(meetStep());
    std::vector<Step> after;
    const detail::Range part = split.part(total, channels, c);
    if (!part.empty()) body(part, lane.steps, after);
    lane.steps.push_back(meetStep());
    lane.steps.insert(lane.steps.end(), after.begin(), after.end());
    plan->lanes.push_back(std::move(lane));
  }
}

void finish(Plan* plan) {
  plan->maxMessageElems = 0;
  plan->nchannels = 1;
  for (const Lane& lane : plan->lanes) plan->nchannels = std::max(plan->nchannels, lane.channel + 1);
}

}  // namespace

Status buildPeerOneShotPlan(const PlanRequest& req, Plan* plan) {
  LOOM_TRY(checkPeerRequest(req, "peer-oneshot"));
  if (req.coll != Collective::AllReduce)
    return invalidArgument("peer-oneshot: {} has no one-shot plan (AllReduce does)", collectiveName(req.coll));
  if (req.nranks == 1) {
    detail::buildSingleRankPlan(req, "peer-oneshot", plan);
    return Status::Ok();
  }
  detail::startPlan(req, "peer-oneshot", plan);
  if (req.count > 0) {
    plan->scratchElems = req.count;
    addLanes(req, req.count, plan, [&](detail::Range part, std::vector<Step>& steps, std::vector<Step>& after) {
      steps.push_back(reduceRanksStep(detail::sendRef(part.begin), detail::ref(kScratchBuffer, part.begin), part.size()));
      after.push_back(detail::copyStep(detail::ref(kScratchBuffer, part.begin), detail::recvRef(part.begin), part.size(),
                                       false));
    });
  }
  finish(plan);
  return Status::Ok();
}

Status buildPeerPlan(const PlanRequest& req, Plan* plan) {
  LOOM_TRY(checkPeerRequest(req, "peer"));
  const Collective coll = req.coll;
  if (coll != Collective::AllReduce && coll != Collective::ReduceScatter && coll != Collective::AllGather &&
      coll != Collective::Broadcast)
    return invalidArgument("peer: {} has no peer-memory plan (AllReduce, ReduceScatter, AllGather, Broadcast do)",
                           collectiveName(coll));
  if (req.nranks == 1) {
    detail::buildSingleRankPlan(req, "peer", plan);
    return Status::Ok();
  }
  detail::startPlan(req, "peer", plan);
  const int r = req.rank;
  const uint64_t count = req.count;
  if (count > 0) {
    if (coll == Collective::AllReduce) {
      // Block r of the vector, cut as the ring cuts a channel's part into ranks' blocks.
      const detail::Range block = detail::splitFor(req).part(count, static_cast<uint64_t>(req.nranks), r);
      addLanes(req, block.size(), plan, [&](detail::Range part, std::vector<Step>& steps, std::vector<Step>&) {
        const uint64_t at = block.begin + part.begin;
        steps.push_back(reduceRanksStep(detail::sendRef(at), onRank(detail::recvRef(at), kEveryRank), part.size()));
      });
    } else if (coll == Collective::ReduceScatter) {
      addLanes(req, count, plan, [&](detail::Range part, std::vector<Step>& steps, std::vector<Step>&) {
        steps.push_back(reduceRanksStep(detail::sendRef(r * count + part.begin), detail::recvRef(part.begin), part.size()));
      });
    } else if (coll == Collective::AllGather) {
      addLanes(req, count, plan, [&](detail::Range part, std::vector<Step>& steps, std::vector<Step>&) {
        steps.push_back(detail::copyStep(detail::sendRef(part.begin),
                                         onRank(detail::recvRef(r * count + part.begin), kEveryRank), part.size(), false));
      });
    } else {  // Broadcast: every rank reads the root's input (the root copies its own, unless in place)
      addLanes(req, count, plan, [&](detail::Range part, std::vector<Step>& steps, std::vector<Step>&) {
        const BufRef from = r == req.root ? detail::sendRef(part.begin) : onRank(detail::sendRef(part.begin), req.root);
        steps.push_back(detail::copyStep(from, detail::recvRef(part.begin), part.size(), false));
      });
    }
  }
  finish(plan);
  return Status::Ok();
}

}  // namespace loom
