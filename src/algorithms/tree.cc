// Double binary tree plans (AllReduce, Reduce, Broadcast): logarithmic depth for small messages at
// scale. Channels alternate between the two complementary binary trees of double_tree.h (channel c
// uses tree c % 2 over the channel's ordering), so with two or more channels each tree carries about
// half of the data, as NCCL's channels do; with one channel a single tree carries all of it. A channel
// takes a contiguous part of the data, cut into messages of at most chunkElems that pipeline up the
// tree (reduce) and down it (broadcast).
//
// A channel is one lane (the broadcast's results land on elements the reduction reads in place, and
// lanes of a rank must not share elements). Its steps come in rounds: round i reduces piece i up the
// tree and (AllReduce) broadcasts an earlier piece down it. Each connection carries one tree direction
// only, so sender and receiver agree on message order; see kLagPerLevel for why the schedule needs no
// more than two FIFO slots.
#include "algorithms/build_helpers.h"
#include "algorithms/builders.h"
#include "algorithms/double_tree.h"

namespace loom {
namespace {

using detail::pieceCount;
using detail::Range;
using detail::recvRef;
using detail::sendRef;

// One tree as this rank sees it, in ranks.
struct TreeRole {
  int parent = -1;
  int children[2] = {-1, -1};
  int nchildren = 0;
  int depth = 0;
  bool isRoot() const { return parent < 0; }
};

TreeRole treeRole(const detail::RingOrder& order, int n, int tree, int rootPos) {
  const detail::TreeLinks links = detail::treeLinks(n, tree, rootPos, order.pos);
  TreeRole role;
  role.parent = links.parent < 0 ? -1 : order.at(links.parent);
  role.nchildren = links.nchildren;
  role.depth = links.depth;
  for (int i = 0; i < links.nchildren; ++i) role.children[i] = order.at(links.children[i]);
  return role;
}

// Reduction of piece p towards the root. `partial` holds a non-root's sum of its input and its first
// child's until the second child's arrives: recv (AllReduce, overwritten later by the result) or
// scratch (Reduce, where only the root has a recv buffer). The root finalizes into recv.
void reduceUp(const TreeRole& t, const Range& p, uint32_t partial, Lane* lane) {
  const BufRef input = sendRef(p.begin);
  if (t.nchildren == 0) {
    lane->steps.push_back(detail::sendStep(t.parent, input, p.size()));
    return;
  }
  if (t.isRoot()) {
    lane->steps.push_back(
        detail::recvReduceStep(t.children[0], input, recvRef(p.begin), p.size(), t.nchildren == 1));
    if (t.nchildren == 2)
      lane->steps.push_back(detail::recvReduceStep(t.children[1], recvRef(p.begin), recvRef(p.begin), p.size(), true));
    return;
  }
  if (t.nchildren == 1) {
    lane->steps.push_back(detail::recvReduceSendStep(t.children[0], t.parent, input, BufRef{}, p.size(), false));
    return;
  }
  const BufRef acc = detail::ref(partial, p.begin);
  lane->steps.push_back(detail::recvReduceStep(t.children[0], input, acc, p.size(), false));
  lane->steps.push_back(detail::recvReduceSendStep(t.children[1], t.parent, acc, BufRef{}, p.size(), false));
}

// Distribution of piece p from the root, which sends from `rootSource`; the others store it in recv.
void broadcastDown(const TreeRole& t, const Range& p, const BufRef& rootSource, Lane* lane) {
  const BufRef out = recvRef(p.begin);
  if (t.isRoot()) {
    for (int c = 0; c < t.nchildren; ++c) lane->steps.push_back(detail::sendStep(t.children[c], rootSource, p.size()));
    return;
  }
  if (t.nchildren == 0) {
    lane->steps.push_back(detail::recvStep(t.parent, out, p.size()));
    return;
  }
  lane->steps.push_back(detail::recvCopySendStep(t.parent, t.children[0], out, p.size()));
  if (t.nchildren == 2) lane->steps.push_back(detail::sendStep(t.children[1], out, p.size()));
}

// AllReduce: a rank at depth d broadcasts piece i - kLagPerLevel*d in round i. Along every edge the
// child then runs kLagPerLevel rounds ahead of its parent's broadcast, enough to cover the round trip
// child -> parent -> child while the lane goes on reducing; deeper lags would need more than the two
// FIFO slots an executor must offer (each edge holds up to kLagPerLevel messages in its two directions).
constexpr uint64_t kLagPerLevel = 3;

void treeChannel(const PlanRequest& req, int channel, const Range& part, Lane* lane, bool* needsScratch) {
  const int n = req.nranks;
  const detail::RingOrder order = detail::ringOrder(req, channel);
  const int rootPos = req.coll == Collective::AllReduce ? -1 : order.positionOf(req.root);
  const TreeRole tree = treeRole(order, n, channel % 2, rootPos);
  const uint64_t pieces = pieceCount(part.size(), req.chunkElems);
  auto piece = [&](uint64_t m) { return detail::splitFor(req).part(part.size(), pieces, m).shifted(part.begin); };
  switch (req.coll) {
    case Collective::AllReduce: {
      const uint64_t lag = kLagPerLevel * static_cast<uint64_t>(tree.depth);
      for (uint64_t i = 0; i < pieces + lag; ++i) {
        if (i < pieces) reduceUp(tree, piece(i), kRecvBuffer, lane);
        if (i >= lag) broadcastDown(tree, piece(i - lag), recvRef(piece(i - lag).begin), lane);
      }
      break;
    }
    case Collective::Reduce:
      for (uint64_t i = 0; i < pieces; ++i) reduceUp(tree, piece(i), kScratchBuffer, lane);
      *needsScratch = !tree.isRoot() && tree.nchildren == 2;
      break;
    case Collective::Broadcast:
      for (uint64_t i = 0; i < pieces; ++i) broadcastDown(tree, piece(i), sendRef(piece(i).begin), lane);
      // The root's own copy comes last so that its first messages leave at once (a no-op in place).
      if (req.rank == req.root)
        lane->steps.push_back(detail::copyStep(sendRef(part.begin), recvRef(part.begin), part.size(), false));
      break;
    default: break;
  }
}

}  // namespace

Status buildTreePlan(const PlanRequest& req, Plan* plan) {
  LOOM_TRY(detail::validateRequest(req));
  if (req.coll != Collective::AllReduce && req.coll != Collective::Reduce && req.coll != Collective::Broadcast)
    return invalidArgument("tree: {} has no tree plan (AllReduce, Reduce and Broadcast do)", collectiveName(req.coll));
  if (req.nranks == 1) {
    detail::buildSingleRankPlan(req, "tree", plan);
    return Status::Ok();
  }
  detail::startPlan(req, "tree", plan);
  bool needsScratch = false;
  for (int c = 0; c < req.nchannels; ++c) {
    const Range part = detail::splitFor(req).part(req.count, static_cast<uint64_t>(req.nchannels), c);
    if (part.empty()) continue;
    Lane lane;
    lane.channel = static_cast<uint32_t>(c);
    bool scratch = false;
    treeChannel(req, c, part, &lane, &scratch);
    needsScratch = needsScratch || scratch;
    plan->lanes.push_back(std::move(lane));
  }
  // Partial sums live at the data's own offsets in scratch.
  if (needsScratch) plan->scratchElems = req.count;
  detail::finishPlan(plan);
  return Status::Ok();
}

std::vector<int> allReduceTreeParents(const std::vector<int>& order, int channel) {
  const int n = static_cast<int>(order.size());
  std::vector<int> parents(order.size(), -1);
  for (int pos = 0; pos < n; ++pos) {
    const detail::TreeLinks links = detail::treeLinks(n, channel % 2, -1, pos);
    parents[static_cast<size_t>(order[static_cast<size_t>(pos)])] =
        links.parent < 0 ? -1 : order[static_cast<size_t>(links.parent)];
  }
  return parents;
}

}  // namespace loom
