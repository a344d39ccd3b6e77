#include "collectives.h"

#include <cctype>
#include <string>

namespace loomperf {
namespace {

double one(int) { return 1.0; }
double ranks(int n) { return n; }
double allReduceBus(int n) { return 2.0 * (n - 1) / n; }
double ringBus(int n) { return static_cast<double>(n - 1) / n; }

bool everyRank(const RankView&) { return true; }
bool rootOnly(const RankView& v) { return v.rank == v.root; }

// count elements everywhere (allreduce, broadcast, reduce, sendrecv).
Layout sameCount(size_t count, int) { return {count, count, count, 0, 0}; }

// Each rank contributes count/n to a gathered total (allgather, gather).
Layout gathered(size_t count, int n) {
  const size_t part = count / n;
  return {part, part * n, part, part, 0};
}

// Each rank receives count/n of a scattered total (reducescatter, scatter).
Layout scattered(size_t count, int n) {
  const size_t part = count / n;
  return {part * n, part, part, 0, part};
}

Layout allToAll(size_t count, int n) {
  const size_t part = count / n;
  return {part * n, part * n, part, 0, 0};
}

// ---- calls ----
loomResult_t runAllReduce(const OpCall& c) {
  return loomAllReduce(c.send, c.recv, c.view.paramCount, c.type, c.op, c.comm, c.stream);
}
loomResult_t runAllGather(const OpCall& c) {
  return loomAllGather(c.send, c.recv, c.view.paramCount, c.type, c.comm, c.stream);
}
loomResult_t runReduceScatter(const OpCall& c) {
  return loomReduceScatter(c.send, c.recv, c.view.paramCount, c.type, c.op, c.comm, c.stream);
}
loomResult_t runBroadcast(const OpCall& c) {
  return loomBroadcast(c.send, c.recv, c.view.paramCount, c.type, c.view.root, c.comm, c.stream);
}
loomResult_t runReduce(const OpCall& c) {
  return loomReduce(c.send, c.recv, c.view.paramCount, c.type, c.op, c.view.root, c.comm, c.stream);
}
loomResult_t runAllToAll(const OpCall& c) {
  return loomAlltoAll(c.send, c.recv, c.view.paramCount, c.type, c.comm, c.stream);
}
loomResult_t runGather(const OpCall& c) {
  return loomGather(c.send, c.recv, c.view.paramCount, c.type, c.view.root, c.comm, c.stream);
}
loomResult_t runScatter(const OpCall& c) {
  return loomScatter(c.send, c.recv, c.view.paramCount, c.type, c.view.root, c.comm, c.stream);
}
// A ring shift, as nccl-tests' sendrecv: send to rank+1, receive from rank-1, fused by a group.
loomResult_t runSendRecv(const OpCall& c) {
  const int n = c.view.nranks;
  const int sendPeer = (c.view.rank + 1) % n;
  const int recvPeer = (c.view.rank - 1 + n) % n;
  loomResult_t r = loomGroupStart();
  if (r != loomSuccess) return r;
  loomResult_t s = loomSend(c.send, c.view.paramCount, c.type, sendPeer, c.comm, c.stream);
  loomResult_t v = loomRecv(c.recv, c.view.paramCount, c.type, recvPeer, c.comm, c.stream);
  r = loomGroupEnd();
  return s != loomSuccess ? s : v != loomSuccess ? v : r;
}

// ---- expected results: element j of this rank's receive buffer ----
double expectReduced(const ValuePattern& p, const RankView&, size_t j) { return p.reduced(j); }
double expectRootInput(const ValuePattern& p, const RankView& v, size_t j) { return p.input(v.root, j); }
double expectGathered(const ValuePattern& p, const RankView& v, size_t j) {
  return p.input(static_cast<int>(j / v.paramCount), j % v.paramCount);
}
double expectReduceScattered(const ValuePattern& p, const RankView& v, size_t j) {
  return p.reduced(v.rank * v.paramCount + j);
}
double expectAllToAll(const ValuePattern& p, const RankView& v, size_t j) {
  return p.input(static_cast<int>(j / v.paramCount), v.rank * v.paramCount + j % v.paramCount);
}
double expectScattered(const ValuePattern& p, const RankView& v, size_t j) {
  return p.input(v.root, v.rank * v.paramCount + j);
}
double expectFromPrevious(const ValuePattern& p, const RankView& v, size_t j) {
  return p.input((v.rank - 1 + v.nranks) % v.nranks, j);
}

}  // namespace

const std::vector<Collective>& allCollectives() {
  static const std::vector<Collective> collectives = {
      {"all_reduce", "loomAllReduce", true, false, sameCount, one, allReduceBus, runAllReduce, everyRank,
       expectReduced},
      {"all_gather", "loomAllGather", false, false, gathered, ranks, ringBus, runAllGather, everyRank,
       expectGathered},
      {"reduce_scatter", "loomReduceScatter", true, false, scattered, ranks, ringBus, runReduceScatter,
       everyRank, expectReduceScattered},
      {"broadcast", "loomBroadcast", false, true, sameCount, one, one, runBroadcast, everyRank,
       expectRootInput},
      {"reduce", "loomReduce", true, true, sameCount, one, one, runReduce, rootOnly, expectReduced},
      {"alltoall", "loomAlltoAll", false, false, allToAll, ranks, ringBus, runAllToAll, everyRank,
       expectAllToAll},
      {"gather", "loomGather", false, true, gathered, ranks, ringBus, runGather, rootOnly, expectGathered},
      {"scatter", "loomScatter", false, true, scattered, ranks, ringBus, runScatter, everyRank,
       expectScattered},
      {"sendrecv", "loomSend/loomRecv", false, false, sameCount, one, one, runSendRecv, everyRank,
       expectFromPrevious},
  };
  return collectives;
}

const Collective* findCollective(std::string_view name) {
  auto squash = [](std::string_view s) {
    if (s.size() > 5 && s.substr(s.size() - 5) == "_perf") s.remove_suffix(5);
    std::string out;
    for (char ch : s)
      if (ch != '_' && ch != '-') out += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return out;
  };
  const std::string wanted = squash(name);
  for (const auto& c : allCollectives())
    if (squash(c.name) == wanted) return &c;
  return nullptr;
}

}  // namespace loomperf
