// Direct plans: every rank talks to every peer itself, one hop. Channels split each peer's data into
// contiguous parts. Data movement uses one lane per (peer, direction, channel) plus one lane for the
// rank's local copy. Reductions need an order between receiving and reducing, so the rank that
// completes a value receives from all peers in one lane.
#include <map>
#include <tuple>

#include "algorithms/build_helpers.h"
#include "algorithms/builders.h"

namespace loom {
namespace {

using detail::pieceCount;
using detail::Range;
using detail::recvRef;
using detail::sendRef;

enum class Role { SendTo, RecvFrom, Local, Combine };

// Lanes created on first use, kept in creation order.
class LaneTable {
 public:
  explicit LaneTable(Plan* plan) : plan_(plan) {}
  Lane& get(Role role, int peer, int channel) {
    const auto key = std::make_tuple(static_cast<int>(role), peer, channel);
    auto it = index_.find(key);
    if (it == index_.end()) {
      it = index_.emplace(key, plan_->lanes.size()).first;
      plan_->lanes.emplace_back();
      plan_->lanes.back().channel = static_cast<uint32_t>(channel);
    }
    return plan_->lanes[it->second];
  }

 private:
  Plan* plan_;
  std::map<std::tuple<int, int, int>, size_t> index_;
};

// Calls fn(piece) for every message-sized piece of range.
template <typename Fn>
void forEachPiece(const Range& range, const PlanRequest& req, Fn&& fn) {
  const detail::Split split = detail::splitFor(req);
  const uint64_t pieces = pieceCount(range.size(), req.chunkElems);
  for (uint64_t m = 0; m < pieces; ++m) fn(split.part(range.size(), pieces, m).shifted(range.begin));
}

// Sends srcBase+part to peer in the (peer, send, channel) lane; recvParts is the matching receive.
void sendParts(LaneTable& lanes, const PlanRequest& req, int peer, int channel, uint64_t srcBase, const Range& part) {
  Lane& lane = lanes.get(Role::SendTo, peer, channel);
  forEachPiece(part, req,
               [&](Range p) { lane.steps.push_back(detail::sendStep(peer, sendRef(srcBase + p.begin), p.size())); });
}

void recvParts(LaneTable& lanes, const PlanRequest& req, int peer, int channel, uint64_t dstBase, const Range& part) {
  Lane& lane = lanes.get(Role::RecvFrom, peer, channel);
  forEachPiece(part, req,
               [&](Range p) { lane.steps.push_back(detail::recvStep(peer, recvRef(dstBase + p.begin), p.size())); });
}

void localCopy(LaneTable& lanes, uint64_t srcOffset, uint64_t dstOffset, uint64_t count) {
  lanes.get(Role::Local, -1, 0).steps.push_back(detail::copyStep(sendRef(srcOffset), recvRef(dstOffset), count, false));
}

// Receives part from every peer (in the order root+1, root+2, ...) and reduces it into recv at
// dstBase; the first reduction reads the own input at srcBase, the last one finalizes. In place the
// first reduction reads and writes the same elements, later ones only the output.
void combineFromPeers(Lane& lane, const PlanRequest& req, int self, uint64_t srcBase, uint64_t dstBase,
                      const Range& part) {
  const int n = req.nranks;
  forEachPiece(part, req, [&](Range p) {
    for (int i = 1; i < n; ++i) {
      const BufRef src = i == 1 ? sendRef(srcBase + p.begin) : recvRef(dstBase + p.begin);
      lane.steps.push_back(
          detail::recvReduceStep((self + i) % n, src, recvRef(dstBase + p.begin), p.size(), i == n - 1));
    }
  });
}

// AllReduce in two one-hop phases in a single lane per channel: every rank sends each owner its
// block (the channel's part split fairly into n blocks) and reduces its own block as the peers' pieces
// arrive, then sends the final block to every peer and receives theirs. Each piece index is one round
// of "send to all, then receive from all", so one FIFO slot per connection suffices. In place is safe:
// the input of another rank's block is only read in phase 1, its output only written in phase 2.
void directAllReduce(const PlanRequest& req, const Range& part, Lane* lane) {
  const int n = req.nranks;
  const int r = req.rank;
  const detail::Split split = detail::splitFor(req);
  auto block = [&](int j) { return split.part(part.size(), n, j).shifted(part.begin); };
  const uint64_t pieces = pieceCount(split.largest(part.size(), n), req.chunkElems);
  auto piece = [&](int j, uint64_t m) {
    const Range b = block(j);
    return split.part(b.size(), pieces, m).shifted(b.begin);
  };
  for (uint64_t m = 0; m < pieces; ++m) {
    for (int i = 1; i < n; ++i) {
      const int to = (r + i) % n;
      const Range p = piece(to, m);
      if (!p.empty()) lane->steps.push_back(detail::sendStep(to, sendRef(p.begin), p.size()));
    }
    const Range own = piece(r, m);
    if (own.empty()) continue;
    for (int i = 1; i < n; ++i) {
      const int from = detail::wrap(r - i, n);
      const BufRef src = i == 1 ? sendRef(own.begin) : recvRef(own.begin);
      lane->steps.push_back(detail::recvReduceStep(from, src, recvRef(own.begin), own.size(), i == n - 1));
    }
  }
  for (uint64_t m = 0; m < pieces; ++m) {
    const Range own = piece(r, m);
    if (!own.empty()) {
      for (int i = 1; i < n; ++i)
        lane->steps.push_back(detail::sendStep((r + i) % n, recvRef(own.begin), own.size()));
    }
    for (int i = 1; i < n; ++i) {
      const int from = detail::wrap(r - i, n);
      const Range p = piece(from, m);
      if (!p.empty()) lane->steps.push_back(detail::recvStep(from, recvRef(p.begin), p.size()));
    }
  }
}

}  // namespace

Status buildDirectPlan(const PlanRequest& req, Plan* plan) {
  LOOM_TRY(detail::validateRequest(req));
  if (req.nranks == 1) {
    detail::buildSingleRankPlan(req, "direct", plan);
    return Status::Ok();
  }
  detail::startPlan(req, "direct", plan);
  const int n = req.nranks;
  const int r = req.rank;
  const int root = req.root;
  const uint64_t count = req.count;
  LaneTable lanes(plan);
  for (int c = 0; c < req.nchannels; ++c) {
    // The channel's part of the data (of every rank's block for the per-rank collectives).
    const Range part = detail::splitFor(req).part(count, static_cast<uint64_t>(req.nchannels), c);
    if (part.empty()) continue;
    switch (req.coll) {
      case Collective::AllReduce:
        directAllReduce(req, part, &lanes.get(Role::Combine, -1, c));
        break;
      case Collective::Broadcast:
        for (int p = 0; p < n; ++p) {
          if (p == r) continue;
          if (r == root) sendParts(lanes, req, p, c, 0, part);
          if (p == root) recvParts(lanes, req, p, c, 0, part);
        }
        break;
      case Collective::Reduce:
        if (r == root) {
          combineFromPeers(lanes.get(Role::Combine, -1, c), req, root, 0, 0, part);
        } else {
          sendParts(lanes, req, root, c, 0, part);
        }
        break;
      case Collective::AllGather:
        for (int p = 0; p < n; ++p) {
          if (p == r) continue;
          sendParts(lanes, req, p, c, 0, part);
          recvParts(lanes, req, p, c, p * count, part);
        }
        break;
      case Collective::ReduceScatter:
        for (int p = 0; p < n; ++p)
          if (p != r) sendParts(lanes, req, p, c, p * count, part);
        combineFromPeers(lanes.get(Role::Combine, -1, c), req, r, r * count, 0, part);
        break;
      case Collective::AlltoAll:
        for (int p = 0; p < n; ++p) {
          if (p == r) continue;
          sendParts(lanes, req, p, c, p * count, part);
          recvParts(lanes, req, p, c, p * count, part);
        }
        break;
      case Collective::Gather:
        if (r != root) {
          sendParts(lanes, req, root, c, 0, part);
        } else {
          for (int p = 0; p < n; ++p)
            if (p != r) recvParts(lanes, req, p, c, p * count, part);
        }
        break;
      case Collective::Scatter:
        if (r != root) {
          recvParts(lanes, req, root, c, 0, part);
        } else {
          for (int p = 0; p < n; ++p)
            if (p != r) sendParts(lanes, req, p, c, p * count, part);
        }
        break;
      case Collective::SendRecv: return internalError("direct: SendRecv has its own builder");
    }
  }
  if (count > 0) {
    // The rank's own share, where one stays local. In place these copy an element onto itself.
    switch (req.coll) {
      case Collective::Broadcast:
        if (r == root) localCopy(lanes, 0, 0, count);
        break;
      case Collective::AllGather: localCopy(lanes, 0, r * count, count); break;
      case Collective::AlltoAll: localCopy(lanes, r * count, r * count, count); break;
      case Collective::Gather:
        if (r == root) localCopy(lanes, 0, r * count, count);
        break;
      case Collective::Scatter:
        if (r == root) localCopy(lanes, r * count, 0, count);
        break;
      default: break;
    }
  }
  detail::finishPlan(plan);
  return Status::Ok();
}

}  // namespace loom
