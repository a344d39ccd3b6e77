// Point-to-point plans: a group's sends and receives. All sends to one peer form one lane (in call
// order, cut into messages of at most chunkElems), all receives from one peer another, so traffic to
// different peers and the two directions of one pair never wait on each other. Operations with self
// pair up in order and become local copies.
#include <map>

#include "algorithms/build_helpers.h"
#include "algorithms/builders.h"

namespace loom {

Status buildP2pPlan(int nranks, int rank, const std::vector<P2pOp>& ops, uint64_t chunkElems, Plan* plan,
                    uint32_t channel) {
  if (nranks < 1) return invalidArgument("SendRecv: nranks {} must be at least 1", nranks);
  if (rank < 0 || rank >= nranks) return invalidArgument("SendRecv: rank {} out of range [0, {})", rank, nranks);
  if (chunkElems < 1) return invalidArgument("SendRecv: chunkElems must be at least 1");
  size_t receives = 0, anyReceives = 0;
  for (const P2pOp& op : ops) {
    receives += !op.isSend;
    anyReceives += !op.isSend && op.peer == kAnyPeer;
  }
  // Two receives of one plan run side by side on their lanes: one from any source could take the
  // other's message.
  if (anyReceives > 0 && receives > 1)
    return invalidArgument("SendRecv: a receive from any source must be the only receive of its group ({} receives)",
                           receives);
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].peer == kAnyPeer && !ops[i].isSend) continue;
    if (ops[i].peer < 0 || ops[i].peer >= nranks)
      return invalidArgument("SendRecv: {} #{} names peer {}, out of range [0, {})", ops[i].isSend ? "send" : "recv",
                             i, ops[i].peer, nranks);
  }
  *plan = Plan{};
  plan->coll = Collective::SendRecv;
  plan->nranks = nranks;
  plan->rank = rank;
  plan->algorithm = "p2p";

  std::map<std::pair<int, bool>, size_t> laneOf;  // (peer, isSend) -> lane
  auto lane = [&](int peer, bool isSend) -> Lane& {
    auto it = laneOf.find({peer, isSend});
    if (it == laneOf.end()) {
      it = laneOf.emplace(std::make_pair(peer, isSend), plan->lanes.size()).first;
      plan->lanes.emplace_back();
      plan->lanes.back().channel = channel;
    }
    return plan->lanes[it->second];
  };
  std::vector<size_t> selfSends, selfRecvs;
  for (size_t i = 0; i < ops.size(); ++i) {
    const P2pOp& op = ops[i];
    const uint32_t buffer = kFirstP2pBuffer + static_cast<uint32_t>(i);
    if (op.peer == rank) {
      (op.isSend ? selfSends : selfRecvs).push_back(i);
      continue;
    }
    const uint64_t pieces = detail::pieceCount(op.count, chunkElems);
    for (uint64_t m = 0; m < pieces; ++m) {
      const detail::Range p = detail::splitFor(1, chunkElems).part(op.count, pieces, m);  // bytes
      lane(op.peer, op.isSend)
          .steps.push_back(op.isSend ? detail::sendStep(op.peer, detail::ref(buffer, p.begin), p.size())
                                     : detail::recvStep(op.peer, detail::ref(buffer, p.begin), p.size()));
    }
  }
  if (selfSends.size() != selfRecvs.size())
    return invalidArgument("SendRecv: rank {} has {} send(s) to itself but {} recv(s) from itself", rank,
                           selfSends.size(), selfRecvs.size());
  for (size_t k = 0; k < selfSends.size(); ++k) {
    const P2pOp& send = ops[selfSends[k]];
    const P2pOp& recv = ops[selfRecvs[k]];
    if (send.count != recv.count)
      return invalidArgument("SendRecv: rank {} sends {} element(s) to itself (op #{}) but receives {} (op #{})", rank,
                             send.count, selfSends[k], recv.count, selfRecvs[k]);
    if (send.count == 0) continue;
    lane(rank, true).steps.push_back(detail::copyStep(detail::ref(kFirstP2pBuffer + static_cast<uint32_t>(selfSends[k]), 0),
                                                      detail::ref(kFirstP2pBuffer + static_cast<uint32_t>(selfRecvs[k]), 0), send.count,
                                                      false));
  }
  detail::finishPlan(plan);
  return Status::Ok();
}

}  // namespace loom
