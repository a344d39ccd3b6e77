// Ring plans. Each channel takes a contiguous, fairly sized part of the data and moves it around its
// own ring ordering in one lane, cut into messages of at most chunkElems so that the ring pipelines.
//
// Every rank's lane is a sequence in which sends and receives alternate in ring-step order, so a
// schedule where all ranks advance one ring step at a time completes with a single FIFO slot; with
// blocking, in-order connections that makes every schedule complete (no deadlock for any slot count).
#include <algorithm>
#include <vector>

#include "algorithms/build_helpers.h"
#include "algorithms/builders.h"

namespace loom {
namespace {

using detail::pieceCount;
using detail::Range;
using detail::recvRef;
using detail::RingOrder;
using detail::sendRef;

// The ring steps k = 0..2n-2 of an AllReduce loop of `size` elements whose chunk (pos - k) is not
// empty, in order. With fewer grains than ranks only chunks 0..grains-1 (and the last, which holds the
// leftover of a grain) hold any (Split); listing just their steps keeps building plans for thousands of
// ranks linear in the data (the cost model does that).
void nonEmptyRingSteps(int n, int pos, uint64_t size, const detail::Split& split, std::vector<int>* steps) {
  steps->clear();
  const uint64_t grains = size / split.grain;
  if (grains >= static_cast<uint64_t>(n)) {
    for (int k = 0; k <= 2 * n - 2; ++k) steps->push_back(k);
    return;
  }
  auto add = [&](uint64_t j) {
    const int k = detail::wrap(pos - static_cast<int64_t>(j), n);
    steps->push_back(k);
    if (k + n <= 2 * n - 2) steps->push_back(k + n);
  };
  for (uint64_t j = 0; j < grains; ++j) add(j);
  if (size % split.grain != 0) add(static_cast<uint64_t>(n - 1));  // grains < n: not listed yet
  std::sort(steps->begin(), steps->end());
}

// AllReduce: reduce-scatter then all-gather around the ring. A channel's part is processed in loops of
// at most n*chunkElems elements; inside a loop, chunk j (of n fair chunks) starts at ring position j.
// At ring step k the rank at position pos handles chunk pos-k: step 0 sends its own, steps 1..n-2 add
// and forward, step n-1 completes (finalizes, stores) and forwards, steps n..2n-3 store and forward,
// step 2n-2 stores. In place (send == recv) is safe: a chunk's input is read last at the step that
// overwrites it with the final value.
void ringAllReduce(const PlanRequest& req, const Range& part, const RingOrder& ring, Lane* lane) {
  const detail::Split split = detail::splitFor(req);
  const int n = req.nranks;
  const uint64_t loops = pieceCount(pieceCount(part.size(), req.chunkElems), n);
  std::vector<int> ringSteps;
  for (uint64_t l = 0; l < loops; ++l) {
    const Range loop = split.part(part.size(), loops, l).shifted(part.begin);
    nonEmptyRingSteps(n, ring.pos, loop.size(), split, &ringSteps);
    for (int k : ringSteps) {
      const Range c = split.part(loop.size(), n, detail::wrap(ring.pos - k, n)).shifted(loop.begin);
      if (c.empty()) continue;
      Step step;
      if (k == 0) {
        step = detail::sendStep(ring.next(), sendRef(c.begin), c.size());
      } else if (k < n - 1) {
        step = detail::recvReduceSendStep(ring.prev(), ring.next(), sendRef(c.begin), BufRef{}, c.size(), false);
      } else if (k == n - 1) {
        step = detail::recvReduceSendStep(ring.prev(), ring.next(), sendRef(c.begin), recvRef(c.begin), c.size(),
                                          true);
      } else if (k < 2 * n - 2) {
        step = detail::recvCopySendStep(ring.prev(), ring.next(), recvRef(c.begin), c.size());
      } else {
        step = detail::recvStep(ring.prev(), recvRef(c.begin), c.size());
      }
      lane->steps.push_back(step);
    }
  }
}

// Broadcast: a pipelined chain from the root along the ring; the last rank only receives.
void ringBroadcast(const PlanRequest& req, const Range& part, const RingOrder& ring, Lane* lane) {
  const detail::Split split = detail::splitFor(req);
  const int n = req.nranks;
  const int rel = detail::wrap(ring.pos - ring.positionOf(req.root), n);
  const uint64_t pieces = pieceCount(part.size(), req.chunkElems);
  for (uint64_t m = 0; m < pieces; ++m) {
    const Range p = split.part(part.size(), pieces, m).shifted(part.begin);
    if (rel == 0) {
      lane->steps.push_back(detail::sendStep(ring.next(), sendRef(p.begin), p.size()));
    } else if (rel < n - 1) {
      lane->steps.push_back(detail::recvCopySendStep(ring.prev(), ring.next(), recvRef(p.begin), p.size()));
    } else {
      lane->steps.push_back(detail::recvStep(ring.prev(), recvRef(p.begin), p.size()));
    }
  }
  // The root's own copy comes last so that its first message leaves at once (a no-op in place).
  if (rel == 0) lane->steps.push_back(detail::copyStep(sendRef(part.begin), recvRef(part.begin), part.size(), false));
}

// Reduce: a pipelined chain that starts after the root and ends at it; the root completes the value.
void ringReduce(const PlanRequest& req, const Range& part, const RingOrder& ring, Lane* lane) {
  const detail::Split split = detail::splitFor(req);
  const int n = req.nranks;
  const int rel = detail::wrap(ring.pos - ring.positionOf(req.root), n);
  const uint64_t pieces = pieceCount(part.size(), req.chunkElems);
  for (uint64_t m = 0; m < pieces; ++m) {
    const Range p = split.part(part.size(), pieces, m).shifted(part.begin);
    if (rel == 1) {
      lane->steps.push_back(detail::sendStep(ring.next(), sendRef(p.begin), p.size()));
    } else if (rel != 0) {
      lane->steps.push_back(
          detail::recvReduceSendStep(ring.prev(), ring.next(), sendRef(p.begin), BufRef{}, p.size(), false));
    } else {
      lane->steps.push_back(
          detail::recvReduceStep(ring.prev(), sendRef(p.begin), recvRef(p.begin), p.size(), true));
    }
  }
}

// AllGather: the channel moves the same part of every rank's block; at ring step k a rank handles the
// block of the rank k positions before it.
void ringAllGather(const PlanRequest& req, const Range& part, const RingOrder& ring, Lane* lane) {
  const detail::Split split = detail::splitFor(req);
  const int n = req.nranks;
  const uint64_t count = req.count;
  lane->steps.push_back(detail::copyStep(sendRef(part.begin), recvRef(req.rank * count + part.begin), part.size(),
                                         false));
  const uint64_t pieces = pieceCount(part.size(), req.chunkElems);
  for (uint64_t m = 0; m < pieces; ++m) {
    const Range p = split.part(part.size(), pieces, m).shifted(part.begin);
    for (int k = 0; k <= n - 1; ++k) {
      const uint64_t block = static_cast<uint64_t>(ring.at(ring.pos - k)) * count;
      if (k == 0) {
        lane->steps.push_back(detail::sendStep(ring.next(), sendRef(p.begin), p.size()));
      } else if (k < n - 1) {
        lane->steps.push_back(detail::recvCopySendStep(ring.prev(), ring.next(), recvRef(block + p.begin), p.size()));
      } else {
        lane->steps.push_back(detail::recvStep(ring.prev(), recvRef(block + p.begin), p.size()));
      }
    }
  }
}

// ReduceScatter: at ring step k a rank handles the block of the rank k+1 positions before it, so the
// last step (k = n-1) completes its own block. In place (recv == send + rank*count) is safe: the own
// block of the send buffer is read only by that last step, which writes the same elements.
void ringReduceScatter(const PlanRequest& req, const Range& part, const RingOrder& ring, Lane* lane) {
  const detail::Split split = detail::splitFor(req);
  const int n = req.nranks;
  const uint64_t count = req.count;
  const uint64_t pieces = pieceCount(part.size(), req.chunkElems);
  for (uint64_t m = 0; m < pieces; ++m) {
    const Range p = split.part(part.size(), pieces, m).shifted(part.begin);
    for (int k = 0; k <= n - 1; ++k) {
      const uint64_t block = static_cast<uint64_t>(ring.at(ring.pos - 1 - k)) * count;
      if (k == 0) {
        lane->steps.push_back(detail::sendStep(ring.next(), sendRef(block + p.begin), p.size()));
      } else if (k < n - 1) {
        lane->steps.push_back(
            detail::recvReduceSendStep(ring.prev(), ring.next(), sendRef(block + p.begin), BufRef{}, p.size(), false));
      } else {
        lane->steps.push_back(
            detail::recvReduceStep(ring.prev(), sendRef(block + p.begin), recvRef(p.begin), p.size(), true));
      }
    }
  }
}

}  // namespace

Status buildRingPlan(const PlanRequest& req, Plan* plan) {
  const detail::Split split = detail::splitFor(req);
  LOOM_TRY(detail::validateRequest(req));
  switch (req.coll) {
    case Collective::AlltoAll:
    case Collective::Gather:
    case Collective::Scatter: return buildDirectPlan(req, plan);  // no ring schedule beats direct for these
    default: break;
  }
  if (req.nranks == 1) {
    detail::buildSingleRankPlan(req, "ring", plan);
    return Status::Ok();
  }
  detail::startPlan(req, "ring", plan);
  for (int c = 0; c < req.nchannels; ++c) {
    const Range part = split.part(req.count, static_cast<uint64_t>(req.nchannels), c);
    if (part.empty()) continue;
    const RingOrder ring = detail::ringOrder(req, c);
    Lane lane;
    lane.channel = static_cast<uint32_t>(c);
    switch (req.coll) {
      case Collective::AllReduce: ringAllReduce(req, part, ring, &lane); break;
      case Collective::Broadcast: ringBroadcast(req, part, ring, &lane); break;
      case Collective::Reduce: ringReduce(req, part, ring, &lane); break;
      case Collective::AllGather: ringAllGather(req, part, ring, &lane); break;
      case Collective::ReduceScatter: ringReduceScatter(req, part, ring, &lane); break;
      default: return internalError("ring: unexpected collective {}", collectiveName(req.coll));
    }
    plan->lanes.push_back(std::move(lane));
  }
  detail::finishPlan(plan);
  return Status::Ok();
}

}  // namespace loom
