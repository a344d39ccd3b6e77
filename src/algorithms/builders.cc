// Names, buffer sizes, request validation and dispatch (through the registry) shared by every plan builder.
#include "algorithms/builders.h"

#include <algorithm>
#include <limits>

#include "algorithms/build_helpers.h"
#include "algorithms/registry.h"

namespace loom {

bool isReduction(Collective coll) {
  return coll == Collective::AllReduce || coll == Collective::Reduce || coll == Collective::ReduceScatter;
}

bool isRooted(Collective coll) {
  return coll == Collective::Broadcast || coll == Collective::Reduce || coll == Collective::Gather ||
         coll == Collective::Scatter;
}

const char* collectiveName(Collective coll) {
  switch (coll) {
    case Collective::AllReduce: return "AllReduce";
    case Collective::Broadcast: return "Broadcast";
    case Collective::Reduce: return "Reduce";
    case Collective::AllGather: return "AllGather";
    case Collective::ReduceScatter: return "ReduceScatter";
    case Collective::AlltoAll: return "AlltoAll";
    case Collective::Gather: return "Gather";
    case Collective::Scatter: return "Scatter";
    case Collective::SendRecv: return "SendRecv";
  }
  return "unknown";
}

const char* stepKindName(StepKind kind) {
  switch (kind) {
    case StepKind::Send: return "Send";
    case StepKind::Recv: return "Recv";
    case StepKind::RecvReduce: return "RecvReduce";
    case StepKind::RecvReduceSend: return "RecvReduceSend";
    case StepKind::RecvCopySend: return "RecvCopySend";
    case StepKind::Copy: return "Copy";
    case StepKind::Reduce: return "Reduce";
    case StepKind::Meet: return "Meet";
    case StepKind::ReduceRanks: return "ReduceRanks";
  }
  return "unknown";
}

const char* algorithmName(Algorithm algo) { return algorithmEntry(algo).name; }

bool parseAlgorithmName(std::string_view name, Algorithm* algo) {
  const AlgorithmEntry* entry = findAlgorithm(name);
  if (entry) *algo = entry->id;
  return entry != nullptr;
}

Status buildPlan(Algorithm algo, const PlanRequest& req, Plan* plan) { return algorithmEntry(algo).build(req, plan); }

uint64_t sendBufferElems(const PlanRequest& req) {
  const uint64_t n = static_cast<uint64_t>(req.nranks);
  const bool isRoot = req.rank == req.root;
  switch (req.coll) {
    case Collective::AllReduce:
    case Collective::Reduce:
    case Collective::AllGather:
    case Collective::Gather: return req.count;
    case Collective::Broadcast: return isRoot ? req.count : 0;
    case Collective::ReduceScatter:
    case Collective::AlltoAll: return n * req.count;
    case Collective::Scatter: return isRoot ? n * req.count : 0;
    case Collective::SendRecv: return 0;
  }
  return 0;
}

uint64_t recvBufferElems(const PlanRequest& req) {
  const uint64_t n = static_cast<uint64_t>(req.nranks);
  const bool isRoot = req.rank == req.root;
  switch (req.coll) {
    case Collective::AllReduce:
    case Collective::Broadcast:
    case Collective::ReduceScatter:
    case Collective::Scatter: return req.count;
    // NCCL: Reduce's recvbuff is only used on the root; plans never touch it elsewhere.
    case Collective::Reduce: return isRoot ? req.count : 0;
    case Collective::AllGather:
    case Collective::AlltoAll: return n * req.count;
    case Collective::Gather: return isRoot ? n * req.count : 0;
    case Collective::SendRecv: return 0;
  }
  return 0;
}

bool sizeCountsEveryBlock(Collective coll) {
  return coll == Collective::AllGather || coll == Collective::ReduceScatter || coll == Collective::AlltoAll ||
         coll == Collective::Gather || coll == Collective::Scatter;
}

uint64_t callBytes(Collective coll, uint64_t count, size_t elemSize, int nranks) {
  const uint64_t blocks = sizeCountsEveryBlock(coll) ? static_cast<uint64_t>(std::max(nranks, 1)) : 1;
  const uint64_t unit = static_cast<uint64_t>(elemSize) * blocks;
  if (unit != 0 && count > std::numeric_limits<uint64_t>::max() / unit) return std::numeric_limits<uint64_t>::max();
  return count * unit;
}

namespace detail {

Status validateRequest(const PlanRequest& req) {
  const char* name = collectiveName(req.coll);
  if (req.coll == Collective::SendRecv) return invalidArgument("SendRecv plans are built by buildP2pPlan");
  if (req.nranks < 1) return invalidArgument("{}: nranks {} must be at least 1", name, req.nranks);
  if (req.rank < 0 || req.rank >= req.nranks)
    return invalidArgument("{}: rank {} out of range [0, {})", name, req.rank, req.nranks);
  if (isRooted(req.coll) && (req.root < 0 || req.root >= req.nranks))
    return invalidArgument("{}: root {} out of range [0, {})", name, req.root, req.nranks);
  if (req.chunkElems < 1) return invalidArgument("{}: chunkElems must be at least 1", name);
  if (req.nchannels < 1) return invalidArgument("{}: nchannels {} must be at least 1", name, req.nchannels);
  if (req.count > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(req.nranks))
    return invalidArgument("{}: count {} times {} ranks overflows", name, req.count, req.nranks);
  for (size_t c = 0; c < req.rings.size(); ++c) {
    const std::vector<int>& ring = req.rings[c];
    if (ring.size() != static_cast<size_t>(req.nranks))
      return invalidArgument("{}: ring {} has {} entries, expected {} (one per rank)", name, c, ring.size(),
                             req.nranks);
    std::vector<bool> seen(req.nranks, false);
    for (int r : ring) {
      if (r < 0 || r >= req.nranks)
        return invalidArgument("{}: ring {} names rank {}, out of range [0, {})", name, c, r, req.nranks);
      if (seen[r]) return invalidArgument("{}: ring {} names rank {} twice (not a permutation)", name, c, r);
      seen[r] = true;
    }
  }
  return Status::Ok();
}

RingOrder ringOrder(const PlanRequest& req, int channel) {
  RingOrder ring;
  ring.n = req.nranks;
  if (!req.rings.empty()) ring.order = &req.rings[static_cast<size_t>(channel) % req.rings.size()];
  ring.pos = ring.positionOf(req.rank);
  return ring;
}

Step sendStep(int peer, BufRef src, uint64_t count) {
  Step s;
  s.kind = StepKind::Send;
  s.sendPeer = peer;
  s.src = src;
  s.count = count;
  return s;
}

Step recvStep(int peer, BufRef dst, uint64_t count) {
  Step s;
  s.kind = StepKind::Recv;
  s.recvPeer = peer;
  s.dst = dst;
  s.count = count;
  return s;
}

Step recvReduceStep(int peer, BufRef src, BufRef dst, uint64_t count, bool finalize) {
  Step s;
  s.kind = StepKind::RecvReduce;
  s.recvPeer = peer;
  s.src = src;
  s.dst = dst;
  s.count = count;
  s.finalize = finalize;
  return s;
}

Step recvReduceSendStep(int recvPeer, int sendPeer, BufRef src, BufRef dst, uint64_t count, bool finalize) {
  Step s;
  s.kind = StepKind::RecvReduceSend;
  s.recvPeer = recvPeer;
  s.sendPeer = sendPeer;
  s.src = src;
  s.dst = dst;
  s.count = count;
  s.finalize = finalize;
  return s;
}

Step recvCopySendStep(int recvPeer, int sendPeer, BufRef dst, uint64_t count) {
  Step s;
  s.kind = StepKind::RecvCopySend;
  s.recvPeer = recvPeer;
  s.sendPeer = sendPeer;
  s.dst = dst;
  s.count = count;
  return s;
}

Step copyStep(BufRef src, BufRef dst, uint64_t count, bool finalize) {
  Step s;
  s.kind = StepKind::Copy;
  s.src = src;
  s.dst = dst;
  s.count = count;
  s.finalize = finalize;
  return s;
}

Step reduceStep(BufRef src, BufRef dst, uint64_t count, bool finalize) {
  Step s;
  s.kind = StepKind::Reduce;
  s.src = src;
  s.dst = dst;
  s.count = count;
  s.finalize = finalize;
  return s;
}

void startPlan(const PlanRequest& req, const char* algorithm, Plan* plan) {
  *plan = Plan{};
  plan->coll = req.coll;
  plan->nranks = req.nranks;
  plan->rank = req.rank;
  plan->algorithm = algorithm;
}

void finishPlan(Plan* plan) {
  std::erase_if(plan->lanes, [](const Lane& lane) { return lane.steps.empty(); });
  plan->maxMessageElems = 0;
  uint32_t channels = 0;
  for (const Lane& lane : plan->lanes) {
    channels = std::max(channels, lane.channel + 1);
    for (const Step& step : lane.steps)
      if (step.kind != StepKind::Copy && step.kind != StepKind::Reduce) plan->maxMessageElems = std::max(plan->maxMessageElems, step.count);
  }
  plan->nchannels = std::max<uint32_t>(channels, 1);
}

void buildSingleRankPlan(const PlanRequest& req, const char* algorithm, Plan* plan) {
  startPlan(req, algorithm, plan);
  if (req.count > 0) {
    Lane lane;
    lane.steps.push_back(copyStep(sendRef(0), recvRef(0), req.count, isReduction(req.coll)));
    plan->lanes.push_back(std::move(lane));
  }
  finishPlan(plan);
}

}  // namespace detail
}  // namespace loom
