// What the verifier's symbolic memory holds before a plan runs (the inputs, laid out out of place or
// in place) and what it must hold afterwards (the collective's definition).
#include "algorithms/verifier.h"

#include <algorithm>
#include <map>

#include "algorithms/symbolic_machine.h"

namespace loom {
namespace {

using verify::BufferSpec;
using verify::RankMemory;
using verify::Value;

const char* layoutName(bool inPlace) { return inPlace ? "in-place" : "out-of-place"; }

// Rank r's memory for req: send and recv buffers where the layout puts them, then the plan's scratch.
RankMemory collectiveMemory(const PlanRequest& req, int rank, bool inPlace, uint64_t scratchElems) {
  PlanRequest rr = req;
  rr.rank = rank;
  const uint64_t sendElems = sendBufferElems(rr);
  const uint64_t recvElems = recvBufferElems(rr);
  const uint64_t count = req.count;
  // Default: out of place, recv first.
  uint64_t recvBase = 0, sendBase = recvElems, total = recvElems + sendElems;
  if (inPlace && sendElems > 0 && recvElems > 0) {
    // Both buffers exist here only on ranks where the layout applies (Gather/Scatter: the root).
    switch (req.coll) {
      case Collective::AllReduce:
      case Collective::Broadcast:
      case Collective::Reduce:
        sendBase = 0;
        total = recvElems;
        break;
      case Collective::AllGather:
      case Collective::Gather:
        sendBase = rank * count;
        total = recvElems;
        break;
      case Collective::ReduceScatter:
      case Collective::Scatter:
        sendBase = 0;
        recvBase = rank * count;
        total = sendElems;
        break;
      case Collective::AlltoAll:
      case Collective::SendRecv: break;
    }
  }
  RankMemory mem;
  mem.buffers.resize(kFirstP2pBuffer);
  mem.buffers[kSendBuffer] = BufferSpec{sendElems > 0, sendBase, sendElems, false, "send"};
  mem.buffers[kRecvBuffer] = BufferSpec{recvElems > 0, recvBase, recvElems, true, "recv"};
  mem.buffers[kScratchBuffer] = BufferSpec{scratchElems > 0, total, scratchElems, true, "scratch"};
  mem.cells.resize(total + scratchElems);
  for (uint64_t i = 0; i < sendElems; ++i) mem.cells[sendBase + i] = Value::input(rank, kSendBuffer, i);
  return mem;
}

// What recv[i] on rank must hold after the collective.
Value expectedOutput(const PlanRequest& req, int rank, uint64_t i) {
  const uint64_t count = req.count;
  const int n = req.nranks;
  const uint64_t all = n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1;
  auto reduced = [&](uint64_t index) {
    return Value{all, static_cast<uint32_t>(index), static_cast<uint16_t>(kSendBuffer),
                 static_cast<uint8_t>(Value::kDefined | Value::kFinal)};
  };
  switch (req.coll) {
    case Collective::AllReduce:
    case Collective::Reduce: return reduced(i);
    case Collective::ReduceScatter: return reduced(rank * count + i);
    case Collective::Broadcast: return Value::input(req.root, kSendBuffer, i);
    case Collective::AllGather:
    case Collective::Gather: return Value::input(static_cast<int>(i / count), kSendBuffer, i % count);
    case Collective::AlltoAll: return Value::input(static_cast<int>(i / count), kSendBuffer, rank * count + i % count);
    case Collective::Scatter: return Value::input(req.root, kSendBuffer, rank * count + i);
    case Collective::SendRecv: break;
  }
  return Value{};
}

}  // namespace

bool hasInPlaceLayout(Collective coll) { return coll != Collective::AlltoAll && coll != Collective::SendRecv; }

Status verifyPlansInLayout(const PlanRequest& req, const std::vector<Plan>& plansOfAllRanks, bool inPlace) {
  const int n = req.nranks;
  if (static_cast<int>(plansOfAllRanks.size()) != n)
    return invalidArgument("verifier: {} plan(s) for {} ranks", plansOfAllRanks.size(), n);
  if (req.count > 0xffffffffu / static_cast<uint64_t>(std::max(n, 1)))
    return invalidArgument("verifier: count {} too large to track symbolically", req.count);
  std::vector<RankMemory> memory;
  for (int r = 0; r < n; ++r)
    memory.push_back(collectiveMemory(req, r, inPlace, plansOfAllRanks[r].scratchElems));
  verify::MachineConfig config;
  config.nranks = n;
  config.coll = req.coll;
  config.reduction = isReduction(req.coll);
  config.messageLimit = req.chunkElems;
  config.maxChannels = static_cast<uint32_t>(std::max(req.nchannels, 1));
  config.layout = layoutName(inPlace);
  LOOM_TRY(verify::runPlans(config, plansOfAllRanks, &memory));
  for (int r = 0; r < n; ++r) {
    const BufferSpec& recv = memory[r].buffers[kRecvBuffer];
    for (uint64_t i = 0; i < recv.size; ++i) {
      const Value& got = memory[r].cells[recv.base + i];
      const Value want = expectedOutput(req, r, i);
      if (!(got == want))
        return internalError("{} {}: rank {} recv[{}] holds {}, expected {}", collectiveName(req.coll),
                             layoutName(inPlace), r, i, verify::describe(got), verify::describe(want));
    }
  }
  return Status::Ok();
}

Status verifyPlans(const PlanRequest& req, const std::vector<Plan>& plansOfAllRanks) {
  LOOM_TRY(verifyPlansInLayout(req, plansOfAllRanks, false));
  if (hasInPlaceLayout(req.coll)) LOOM_TRY(verifyPlansInLayout(req, plansOfAllRanks, true));
  return Status::Ok();
}

Status buildPlansForAllRanks(Algorithm algo, const PlanRequest& req, std::vector<Plan>* plans) {
  plans->assign(std::max(req.nranks, 0), Plan{});
  for (int r = 0; r < req.nranks; ++r) {
    PlanRequest rr = req;
    rr.rank = r;
    LOOM_TRY(buildPlan(algo, rr, &(*plans)[r]));
  }
  return Status::Ok();
}

Status verifyAlgorithm(Algorithm algo, const PlanRequest& req) {
  std::vector<Plan> plans;
  LOOM_TRY(buildPlansForAllRanks(algo, req, &plans));
  return verifyPlans(req, plans);
}

Status buildP2pPlansForAllRanks(int nranks, const std::vector<std::vector<P2pOp>>& opsOfAllRanks,
                                uint64_t chunkElems, std::vector<Plan>* plans) {
  if (static_cast<int>(opsOfAllRanks.size()) != nranks)
    return invalidArgument("verifier: {} op list(s) for {} ranks", opsOfAllRanks.size(), nranks);
  plans->assign(nranks, Plan{});
  for (int r = 0; r < nranks; ++r) LOOM_TRY(buildP2pPlan(nranks, r, opsOfAllRanks[r], chunkElems, &(*plans)[r]));
  return Status::Ok();
}

Status verifyP2pPlans(int nranks, const std::vector<std::vector<P2pOp>>& opsOfAllRanks, uint64_t chunkElems,
                      const std::vector<Plan>& plansOfAllRanks) {
  if (static_cast<int>(opsOfAllRanks.size()) != nranks || static_cast<int>(plansOfAllRanks.size()) != nranks)
    return invalidArgument("verifier: {} op list(s) and {} plan(s) for {} ranks", opsOfAllRanks.size(),
                           plansOfAllRanks.size(), nranks);
  // The k-th send from a to b feeds the k-th receive on b from a.
  std::map<std::pair<int, int>, std::vector<size_t>> sends, recvs;  // (from, to) -> op indices
  for (int r = 0; r < nranks; ++r) {
    for (size_t i = 0; i < opsOfAllRanks[r].size(); ++i) {
      const P2pOp& op = opsOfAllRanks[r][i];
      if (op.peer < 0 || op.peer >= nranks) return invalidArgument("verifier: rank {} op #{} peer {}", r, i, op.peer);
      if (op.isSend) sends[{r, op.peer}].push_back(i);
      else recvs[{op.peer, r}].push_back(i);
    }
  }
  for (const auto& [pair, sendOps] : sends) {
    const std::vector<size_t>& recvOps = recvs[pair];
    if (sendOps.size() != recvOps.size())
      return invalidArgument("verifier: rank {} sends {} time(s) to rank {}, which receives {} time(s)", pair.first,
                             sendOps.size(), pair.second, recvOps.size());
    for (size_t k = 0; k < sendOps.size(); ++k)
      if (opsOfAllRanks[pair.first][sendOps[k]].count != opsOfAllRanks[pair.second][recvOps[k]].count)
        return invalidArgument("verifier: send #{} of rank {} and recv #{} of rank {} differ in count", sendOps[k],
                               pair.first, recvOps[k], pair.second);
  }
  for (const auto& [pair, recvOps] : recvs)
    if (sends[pair].size() != recvOps.size())
      return invalidArgument("verifier: rank {} receives {} time(s) from rank {}, which sends {} time(s)",
                             pair.second, recvOps.size(), pair.first, sends[pair].size());
  std::vector<RankMemory> memory(nranks);
  for (int r = 0; r < nranks; ++r) {
    const std::vector<P2pOp>& ops = opsOfAllRanks[r];
    RankMemory& mem = memory[r];
    mem.buffers.resize(kFirstP2pBuffer + ops.size());
    uint64_t total = 0;
    for (size_t i = 0; i < ops.size(); ++i) {
      mem.buffers[kFirstP2pBuffer + i] =
          BufferSpec{true, total, ops[i].count, !ops[i].isSend, fmt::format("{}#{}", ops[i].isSend ? "send" : "recv", i)};
      total += ops[i].count;
    }
    const uint64_t scratch = plansOfAllRanks[r].scratchElems;
    mem.buffers[kScratchBuffer] = BufferSpec{scratch > 0, total, scratch, true, "scratch"};
    mem.cells.resize(total + scratch);
    for (size_t i = 0; i < ops.size(); ++i) {
      if (!ops[i].isSend) continue;
      const BufferSpec& spec = mem.buffers[kFirstP2pBuffer + i];
      for (uint64_t e = 0; e < spec.size; ++e)
        mem.cells[spec.base + e] = Value::input(r, static_cast<uint32_t>(kFirstP2pBuffer + i), e);
    }
  }
  verify::MachineConfig config;
  config.nranks = nranks;
  config.coll = Collective::SendRecv;
  config.messageLimit = chunkElems;
  config.maxChannels = 1;
  config.layout = "p2p";
  LOOM_TRY(verify::runPlans(config, plansOfAllRanks, &memory));
  for (const auto& [pair, recvOps] : recvs) {
    const auto [from, to] = pair;
    const std::vector<size_t>& sendOps = sends[pair];
    for (size_t k = 0; k < recvOps.size(); ++k) {
      const BufferSpec& spec = memory[to].buffers[kFirstP2pBuffer + recvOps[k]];
      const uint32_t origin = static_cast<uint32_t>(kFirstP2pBuffer + sendOps[k]);
      for (uint64_t e = 0; e < spec.size; ++e) {
        const Value& got = memory[to].cells[spec.base + e];
        const Value want = Value::input(from, origin, e);
        if (!(got == want))
          return internalError("SendRecv: rank {} {}[{}] holds {}, expected {}", to, spec.name, e, verify::describe(got),
                               verify::describe(want));
      }
    }
  }
  return Status::Ok();
}

Status verifyP2p(int nranks, const std::vector<std::vector<P2pOp>>& opsOfAllRanks, uint64_t chunkElems) {
  std::vector<Plan> plans;
  LOOM_TRY(buildP2pPlansForAllRanks(nranks, opsOfAllRanks, chunkElems, &plans));
  return verifyP2pPlans(nranks, opsOfAllRanks, chunkElems, plans);
}

}  // namespace loom
