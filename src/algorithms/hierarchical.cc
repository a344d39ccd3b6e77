// Hierarchical AllReduce for multi-node shapes, ranks grouped contiguously by node (node = rank /
// ranksPerNode, local index = rank % ranksPerNode):
//   1. reduce-scatter inside the node (a ring over its k ranks): local rank j ends with the node's sum
//      of block j of the channel's part;
//   2. allreduce of block j across nodes, a ring over the ranks with local index j (one rail: each local
//      index has its own NIC on rail-optimized machines, so all of them work at once);
//   3. all-gather inside the node.
// Inter-node traffic is 2(N-1)/N of one block per rank instead of a whole ring's share crossing one
// node boundary per channel. The three phases run in order in one lane per channel (each a pipelined
// ring, as in ring.cc); channels split the data. With one rank per node it is the ring over nodes, with
// one node the intra-node ring.
#include "algorithms/build_helpers.h"
#include "algorithms/builders.h"

namespace loom {
namespace {

using detail::pieceCount;
using detail::Range;
using detail::recvRef;
using detail::sendRef;

struct Shape {
  int k = 1;      // ranks per node
  int nodes = 1;  // N
  int node = 0;   // this rank's node
  int local = 0;  // this rank's local index
  int intra(int localIndex) const { return node * k + detail::wrap(localIndex, k); }
  int inter(int nodeIndex) const { return detail::wrap(nodeIndex, nodes) * k + local; }
};

// Block b of the channel's part belongs to local rank b after the reduce-scatter; blocks are cut into
// `pieces` messages (the count of the largest block, so every block uses the same piece indices).
struct Blocks {
  Range part;
  int k = 1;
  uint64_t pieces = 0;
  detail::Split split;
  Range block(int b) const { return split.part(part.size(), k, b).shifted(part.begin); }
  Range piece(int b, uint64_t m) const {
    const Range blk = block(b);
    return split.part(blk.size(), pieces, m).shifted(blk.begin);
  }
};

// Ring reduce-scatter among the node's ranks: at ring step s a rank handles the block of the rank s+1
// places before it, so the last step completes its own block (finalized when there is only one node).
void intraReduceScatter(const Shape& sh, const Blocks& blocks, Lane* lane) {
  const int k = sh.k;
  for (uint64_t m = 0; m < blocks.pieces; ++m) {
    for (int s = 0; s < k; ++s) {
      const Range p = blocks.piece(detail::wrap(sh.local - 1 - s, k), m);
      if (p.empty()) continue;
      if (s == 0) {
        lane->steps.push_back(detail::sendStep(sh.intra(sh.local + 1), sendRef(p.begin), p.size()));
      } else if (s < k - 1) {
        lane->steps.push_back(detail::recvReduceSendStep(sh.intra(sh.local - 1), sh.intra(sh.local + 1),
                                                         sendRef(p.begin), BufRef{}, p.size(), false));
      } else {
        lane->steps.push_back(detail::recvReduceStep(sh.intra(sh.local - 1), sendRef(p.begin), recvRef(p.begin),
                                                     p.size(), sh.nodes == 1));
      }
    }
  }
}

// Ring allreduce of the own block among the ranks of this rail (ring.cc's schedule over nodes). The
// node's partial sums are read from `partial` (recv after a reduce-scatter, the input with one rank per
// node); results go to recv. In place of partial == recv is safe as in ring.cc: a chunk is read for the
// last time by the step that stores its result.
void interAllReduce(const Shape& sh, const Range& own, uint32_t partial, uint64_t chunkElems, const detail::Split& split,
                    Lane* lane) {
  const int nn = sh.nodes;
  const uint64_t loops = pieceCount(pieceCount(own.size(), chunkElems), nn);
  const int next = sh.inter(sh.node + 1), prev = sh.inter(sh.node - 1);
  for (uint64_t l = 0; l < loops; ++l) {
    const Range loop = split.part(own.size(), loops, l).shifted(own.begin);
    for (int s = 0; s <= 2 * nn - 2; ++s) {
      const Range c = split.part(loop.size(), nn, detail::wrap(sh.node - s, nn)).shifted(loop.begin);
      if (c.empty()) continue;
      const BufRef in = detail::ref(partial, c.begin);
      if (s == 0) {
        lane->steps.push_back(detail::sendStep(next, in, c.size()));
      } else if (s < nn - 1) {
        lane->steps.push_back(detail::recvReduceSendStep(prev, next, in, BufRef{}, c.size(), false));
      } else if (s == nn - 1) {
        lane->steps.push_back(detail::recvReduceSendStep(prev, next, in, recvRef(c.begin), c.size(), true));
      } else if (s < 2 * nn - 2) {
        lane->steps.push_back(detail::recvCopySendStep(prev, next, recvRef(c.begin), c.size()));
      } else {
        lane->steps.push_back(detail::recvStep(prev, recvRef(c.begin), c.size()));
      }
    }
  }
}

// Ring all-gather among the node's ranks: at ring step s a rank forwards the block of the rank s places
// before it.
void intraAllGather(const Shape& sh, const Blocks& blocks, Lane* lane) {
  const int k = sh.k;
  for (uint64_t m = 0; m < blocks.pieces; ++m) {
    for (int s = 0; s < k; ++s) {
      const Range p = blocks.piece(detail::wrap(sh.local - s, k), m);
      if (p.empty()) continue;
      if (s == 0) {
        lane->steps.push_back(detail::sendStep(sh.intra(sh.local + 1), recvRef(p.begin), p.size()));
      } else if (s < k - 1) {
        lane->steps.push_back(
            detail::recvCopySendStep(sh.intra(sh.local - 1), sh.intra(sh.local + 1), recvRef(p.begin), p.size()));
      } else {
        lane->steps.push_back(detail::recvStep(sh.intra(sh.local - 1), recvRef(p.begin), p.size()));
      }
    }
  }
}

}  // namespace

Status buildHierarchicalPlan(const PlanRequest& req, Plan* plan) {
  LOOM_TRY(detail::validateRequest(req));
  if (req.coll != Collective::AllReduce)
    return invalidArgument("hier: {} has no hierarchical plan (AllReduce does)", collectiveName(req.coll));
  if (req.ranksPerNode < 1 || req.nranks % req.ranksPerNode != 0)
    return invalidArgument("hier: needs ranksPerNode dividing nranks {} (got {}; 0 means unknown)", req.nranks,
                           req.ranksPerNode);
  if (req.nranks == 1) {
    detail::buildSingleRankPlan(req, "hier", plan);
    return Status::Ok();
  }
  detail::startPlan(req, "hier", plan);
  Shape sh;
  sh.k = req.ranksPerNode;
  sh.nodes = req.nranks / sh.k;
  sh.node = req.rank / sh.k;
  sh.local = req.rank % sh.k;
  for (int c = 0; c < req.nchannels; ++c) {
    Blocks blocks;
    blocks.split = detail::splitFor(req);
    blocks.part = blocks.split.part(req.count, static_cast<uint64_t>(req.nchannels), c);
    if (blocks.part.empty()) continue;
    blocks.k = sh.k;
    blocks.pieces = pieceCount(blocks.split.largest(blocks.part.size(), sh.k), req.chunkElems);
    Lane lane;
    lane.channel = static_cast<uint32_t>(c);
    if (sh.k > 1) intraReduceScatter(sh, blocks, &lane);
    const Range own = blocks.block(sh.local);
    if (sh.nodes > 1 && !own.empty())
      interAllReduce(sh, own, sh.k > 1 ? kRecvBuffer : kSendBuffer, req.chunkElems, blocks.split, &lane);
    if (sh.k > 1) intraAllGather(sh, blocks, &lane);
    plan->lanes.push_back(std::move(lane));
  }
  detail::finishPlan(plan);
  return Status::Ok();
}

}  // namespace loom
