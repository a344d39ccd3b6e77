#include "plan_cases.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "../api/dtypes.h"
#include "base/datatype.h"

namespace loomgpu {

using loom::Algorithm;
using loom::Collective;
using loomtest::Op;

namespace {

loom::ReduceOp stagingOp() {
  loom::ReduceOp op;
  op.post = loom::PostOpKind::Multiply;
  op.scalar = 0.5;
  op.intScalar = -3;
  return op;
}

char* addBlock(RankMemory& m, size_t bytes, size_t shift) {
  m.blocks.push_back(std::make_unique<GuardedBlock>(bytes, shift));
  return bytes == 0 ? nullptr : m.blocks.back()->data();
}

void fillRandomFloats(loomDataType_t dtype, uint64_t seed, int rank, size_t count, char* out) {
  const size_t es = loom::dataTypeSize(dtype);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t h = loomtest::mix64(seed * 7919 + static_cast<uint64_t>(rank) * 1'000'003 + i);
    const double v = (static_cast<double>(h >> 11) / 9007199254740992.0 - 0.5) * 8.0;
    if (dtype == loomFloat32) {
      const float f = static_cast<float>(v);
      std::memcpy(out + i * es, &f, sizeof f);
    } else {
      loomtest::roundNearestEven(dtype, v, out + i * es);
    }
  }
}

std::vector<RankRun> runsOf(const std::vector<loom::Plan>& plans, const std::vector<RankMemory>& memory) {
  std::vector<RankRun> runs(plans.size());
  for (size_t r = 0; r < plans.size(); ++r) runs[r] = {&plans[r], memory[r].buffers};
  return runs;
}

std::string checkPattern(const char* got, size_t bytes, uint64_t seed, int fromRank, uint64_t firstByte,
                         const std::string& what) {
  size_t mismatches = 0;
  const size_t at = loomtest::findPatternMismatch(got, bytes, seed, fromRank, firstByte, &mismatches);
  return at == SIZE_MAX ? "" : fmt::format("{}: byte {} is wrong ({} bytes differ)", what, at, mismatches);
}

// Each rank's output against the model of tests/api/reference.h.
std::string checkModel(const Case& c, const std::vector<RankMemory>& memory) {
  const size_t block = c.count * loom::dataTypeSize(c.dtype);
  const loomtest::ReduceInputs in{c.dtype, c.op, c.nranks, c.seed};
  for (int r = 0; r < c.nranks; ++r) {
    const char* recv = memory[r].recv;
    std::string failure;
    switch (c.coll) {
      case Collective::AllReduce: failure = loomtest::checkReduced(in, 0, c.count, recv); break;
      case Collective::Reduce:
        if (r == c.root) failure = loomtest::checkReduced(in, 0, c.count, recv);
        break;
      case Collective::ReduceScatter: failure = loomtest::checkReduced(in, r * c.count, c.count, recv); break;
      case Collective::Broadcast: failure = checkPattern(recv, block, c.seed, c.root, 0, "output"); break;
      case Collective::Scatter: failure = checkPattern(recv, block, c.seed, c.root, r * block, "output"); break;
      case Collective::AllGather:
      case Collective::Gather:
      case Collective::AlltoAll:
        if (c.coll == Collective::Gather && r != c.root) break;
        for (int j = 0; j < c.nranks && failure.empty(); ++j)
          failure = checkPattern(recv + j * block, block, c.seed, j, c.coll == Collective::AlltoAll ? r * block : 0,
                                 fmt::format("block from rank {}", j));
        break;
      case Collective::SendRecv: break;
    }
    if (!failure.empty()) return fmt::format("rank {}: {}", r, failure);
  }
  return "";
}

constexpr loomDataType_t kDtypes[] = {loomFloat32, loomBfloat16, loomInt32, loomFloat16};
constexpr Op kOps[] = {Op::Sum, Op::Max, Op::Avg, Op::PreMulSum};

std::vector<Algorithm> algorithmsFor(Collective coll) {
  switch (coll) {
    case Collective::AllReduce:
      return {Algorithm::Ring,         Algorithm::Tree,        Algorithm::Direct,    Algorithm::OneShot,
              Algorithm::Hierarchical, Algorithm::PeerOneShot, Algorithm::PeerMemory};
    case Collective::Reduce: return {Algorithm::Ring, Algorithm::Tree, Algorithm::Direct};
    case Collective::Broadcast: return {Algorithm::Ring, Algorithm::Tree, Algorithm::Direct, Algorithm::PeerMemory};
    case Collective::ReduceScatter:
    case Collective::AllGather: return {Algorithm::Ring, Algorithm::Direct, Algorithm::PeerMemory};
    default: return {Algorithm::Direct};
  }
}

}  // namespace

std::string compareRuns(const std::vector<RankMemory>& got, const std::vector<RankMemory>& want) {
  for (size_t r = 0; r < got.size(); ++r)
    for (size_t b = 0; b < got[r].blocks.size(); ++b) {
      const GuardedBlock& g = *got[r].blocks[b];
      const GuardedBlock& w = *want[r].blocks[b];
      if (std::memcmp(g.whole(), w.whole(), g.wholeBytes()) == 0) continue;
      size_t i = 0;
      while (g.whole()[i] == w.whole()[i]) ++i;
      return fmt::format("rank {} block {}: byte {} (from the data start: {}) differs from the reference run", r, b, i,
                         static_cast<int64_t>(i) - static_cast<int64_t>(g.data() - g.whole()));
    }
  return "";
}

std::string firstFailure(const std::vector<loom::Status>& results) {
  const loom::Status* first = nullptr;
  for (const loom::Status& st : results)
    if (!st.ok() && (!first || (first->code() == loomRemoteError && st.code() != loomRemoteError))) first = &st;
  return first ? first->message() : "";
}

std::string describe(const Case& c) {
  return fmt::format("{} {} n={} root={} count={} {} {}{} ch={} w={}{}{}", loom::collectiveName(c.coll),
                     loom::algorithmName(c.algo), c.nranks, c.root, c.count, loomtest::dtypeName(c.dtype),
                     loomtest::opName(c.op), c.inPlace ? " in-place" : "", c.nchannels, c.workersPerLane,
                     c.direct ? " direct" : "",
                     c.lowLatencyBytes ? fmt::format(" ll<={}", c.lowLatencyBytes) : std::string());
}

loom::PlanRequest requestFor(const Case& c, int rank) {
  loom::PlanRequest req;
  req.coll = c.coll;
  req.nranks = c.nranks;
  req.rank = rank;
  req.root = c.root;
  req.count = c.count;
  req.elemSize = loom::dataTypeSize(c.dtype);
  req.chunkElems = std::max<uint64_t>(1, kSlotBytes / req.elemSize);  // as the tuner sizes chunks to slots
  req.nchannels = c.nchannels;
  if (c.algo == Algorithm::Ring && c.nchannels > 1) {  // the second ring runs the other way round
    std::vector<int> forward(c.nranks);
    std::iota(forward.begin(), forward.end(), 0);
    req.rings = {forward, std::vector<int>(forward.rbegin(), forward.rend())};
  }
  if (c.algo == Algorithm::Hierarchical) req.ranksPerNode = 2;
  // Rank threads of one process (the emulation's ranks share its memory): peer-memory plans apply.
  req.peerMemory = c.algo == Algorithm::PeerOneShot || c.algo == Algorithm::PeerMemory;
  return req;
}

// The operator the plan runs with, as core/run/planner.cc makes it: PreMulSum is a plain sum over inputs
// scaled beforehand (stagingOp, the scalar of tests/api/reference.h's preMulScalar).
loom::ReduceOp planOp(const Case& c) {
  loom::ReduceOp op;
  if (c.op == Op::Max) op.kind = loom::ReduceKind::Max;
  if (c.op == Op::Avg) {
    op.post = loom::PostOpKind::Divide;
    op.divisor = static_cast<uint64_t>(c.nranks);
  }
  return op;
}

RankMemory makeRankMemory(const Case& c, const loom::Plan& plan) {
  const int rank = plan.rank;
  const loom::PlanRequest req = requestFor(c, rank);
  const size_t es = req.elemSize;
  const uint64_t sendElems = loom::sendBufferElems(req), recvElems = loom::recvBufferElems(req);
  RankMemory m;
  if (c.inPlace) {
    uint64_t sendAt = 0, recvAt = 0;  // elements into the shared block
    if (c.coll == Collective::AllGather) sendAt = rank * c.count;
    if (c.coll == Collective::ReduceScatter) recvAt = rank * c.count;
    if (c.coll == Collective::Gather && rank == c.root) sendAt = c.root * c.count;
    if (c.coll == Collective::Scatter && rank == c.root) recvAt = c.root * c.count;
    char* base = addBlock(m, std::max(sendAt + sendElems, recvAt + recvElems) * es, 0);
    m.send = base ? base + sendAt * es : nullptr;
    m.recv = base ? base + recvAt * es : nullptr;
  } else {
    m.send = addBlock(m, sendElems * es, 0);
    m.recv = addBlock(m, recvElems * es, (rank % 2) * es);  // odd ranks: output off the 16-byte grid
  }
  char* scratch = addBlock(m, plan.scratchElems * es, 0);
  for (size_t b = 0; b < m.blocks.size(); ++b) {  // stale bytes everywhere, guards included
    const GuardedBlock& block = *m.blocks[b];
    loomtest::fillPattern(const_cast<char*>(block.whole()), block.wholeBytes(), c.seed ^ 0x5eed,
                          static_cast<int>(rank * 10 + b), 0);
  }
  if (c.randomFloats)
    fillRandomFloats(c.dtype, c.seed, rank, sendElems, m.send);
  else if (isReduction(c.coll))
    loomtest::fillReduceInput({c.dtype, c.op, c.nranks, c.seed}, rank, 0, sendElems, m.send);
  else
    loomtest::fillPattern(m.send, sendElems * es, c.seed, rank, 0);
  char* send = m.send;
  if (c.op == Op::PreMulSum && sendElems > 0) {
    send = addBlock(m, sendElems * es, 0);
    std::memset(const_cast<char*>(m.blocks.back()->whole()), 0x5a, m.blocks.back()->wholeBytes());
    loom::copyArray(send, m.send, sendElems, c.dtype, stagingOp(), true);
  }
  m.buffers = {send, m.recv, scratch};
  return m;
}

std::string runCase(const Case& c, const HostFifoMesh* mesh) {
  std::vector<loom::Plan> plans(c.nranks);
  for (int r = 0; r < c.nranks; ++r)
    if (loom::Status st = loom::buildPlan(c.algo, requestFor(c, r), &plans[r]); !st.ok())
      return describe(c) + ": building the plan: " + st.message();
  std::vector<RankMemory> emulated, reference;
  for (const loom::Plan& plan : plans) {
    emulated.push_back(makeRankMemory(c, plan));
    reference.push_back(makeRankMemory(c, plan));
  }
  std::unique_ptr<HostFifoMesh> ownMesh;
  if (!mesh)
    mesh = (ownMesh = std::make_unique<HostFifoMesh>(c.nranks, c.nchannels, kSlots, kSlotBytes, c.direct)).get();
  uint32_t abortWord = 0;  // a failing lane raises it: the run stops instead of waiting out the timeout
  EmulationOptions options;
  options.workersPerLane = c.workersPerLane;
  options.abort = &abortWord;
  options.lowLatencyBytes = c.lowLatencyBytes;
  for (int r = 0; r < c.nranks; ++r) options.startDelayMs.push_back(static_cast<uint32_t>(r) * c.staggerMs);
  const std::vector<loom::Status> results = runEmulated(runsOf(plans, emulated), *mesh, c.dtype, planOp(c), options);
  if (std::string failure = firstFailure(results); !failure.empty()) return describe(c) + ": " + failure;
  if (loom::Status st = runReference(runsOf(plans, reference), c.dtype, planOp(c)); !st.ok())
    return describe(c) + ": " + st.message();
  if (std::string diff = compareRuns(emulated, reference); !diff.empty()) return describe(c) + ": " + diff;
  if (c.randomFloats) return "";
  if (std::string wrong = checkModel(c, emulated); !wrong.empty()) return describe(c) + ": " + wrong;
  return "";
}

bool applies(const Case& c) {
  if (c.algo == Algorithm::OneShot) return c.count * loom::dataTypeSize(c.dtype) <= kSlotBytes;
  if (c.algo == Algorithm::Hierarchical) return c.nranks == 4;
  return true;
}

std::vector<Case> matrixFor(Collective coll) {
  std::vector<Case> cases;
  for (Algorithm algo : algorithmsFor(coll))
    for (int n : {1, 2, 3, 4, 8}) {
      const bool peerMemory = algo == Algorithm::PeerOneShot || algo == Algorithm::PeerMemory;
      if (n == 8 && !(coll == Collective::AllReduce && (algo == Algorithm::Ring || peerMemory))) continue;
      for (uint64_t count : kCounts)
        for (loomDataType_t dtype : kDtypes)
          for (Op op : kOps) {
            if (!isReduction(coll) && op != Op::Sum) continue;  // data movement: the operator plays no part
            for (bool inPlace : {false, true}) {
              if (inPlace && coll == Collective::AlltoAll) continue;
              Case c;
              c.coll = coll;
              c.algo = algo;
              c.nranks = n;
              c.root = static_cast<int>(count % static_cast<uint64_t>(n));
              c.count = count;
              c.dtype = dtype;
              c.op = op;
              c.inPlace = inPlace;
              c.nchannels = count >= 1000 ? 2 : 1;
              c.seed = cases.size() + 1;
              c.direct = (loomtest::mix64(c.seed) & 1) != 0;  // not in step with any loop above
              // A third with every message as low-latency words, a third with those up to 1 KiB (the
              // protocols mixed on one FIFO), a third without.
              const uint64_t ll[] = {0, 1024, loom::cuda::kLowLatencyBytes};
              c.lowLatencyBytes = ll[(loomtest::mix64(c.seed) >> 8) % 3];
              if (applies(c)) cases.push_back(c);
            }
          }
    }
  return cases;
}

std::string runAll(const std::vector<Case>& cases) {
  std::string failures;
  int failed = 0;
  for (const Case& c : cases) {
    std::string f = runCase(c);
    if (f.empty()) continue;
    if (++failed <= 5) failures += f + "\n";
  }
  if (failed > 5) failures += fmt::format("... {} failures in all\n", failed);
  return failures;
}

// Each rank sends `count` bytes to rank+1 and then `100` more, count/2+1 to rank+2, 7 to itself, and
// receives the matching messages. Checked against the reference run and the patterns.
std::string runP2pGroup(int n, uint64_t count, bool direct) {
  struct Msg {
    bool isSend;
    int peer;
    uint64_t bytes;
    uint64_t tag;  // pattern seed: equal on both ends of a message
  };
  auto groupOf = [&](int r) {
    std::vector<Msg> ops;
    auto pair = [&](int k, uint64_t bytes, uint64_t tag) {
      if (bytes == 0) return;
      ops.push_back({true, (r + k) % n, bytes, tag});
      ops.push_back({false, ((r - k) % n + n) % n, bytes, tag});
    };
    if (n > 1) pair(1, count, 1);
    if (n > 2) pair(2, count / 2 + 1, 2);
    pair(0, 7, 3);
    if (n > 1) pair(1, 100, 4);
    return ops;
  };
  std::vector<loom::Plan> plans(n);
  std::vector<std::vector<Msg>> groups(n);
  std::vector<RankMemory> emulated(n), reference(n);
  for (int r = 0; r < n; ++r) {
    groups[r] = groupOf(r);
    std::vector<loom::P2pOp> ops;
    for (const Msg& m : groups[r]) ops.push_back({m.isSend, m.peer, m.bytes});
    if (loom::Status st = loom::buildP2pPlan(n, r, ops, kSlotBytes, &plans[r]); !st.ok()) return st.message();
    for (RankMemory* m : {&emulated[r], &reference[r]}) {
      m->buffers = {nullptr, nullptr, nullptr};
      for (const Msg& msg : groups[r]) {
        char* p = addBlock(*m, msg.bytes, r % 2);
        loomtest::fillPattern(const_cast<char*>(m->blocks.back()->whole()), m->blocks.back()->wholeBytes(), 99, r, 0);
        if (msg.isSend) loomtest::fillPattern(p, msg.bytes, msg.tag, r, 0);
        m->buffers.push_back(p);
      }
    }
  }
  const HostFifoMesh mesh(n, 1, kSlots, kSlotBytes, direct);
  const std::string what = fmt::format("p2p group n={} count={}{}", n, count, direct ? " direct" : "");
  uint32_t abortWord = 0;
  EmulationOptions options;
  options.abort = &abortWord;
  if (std::string failure =
          firstFailure(runEmulated(runsOf(plans, emulated), mesh, loomUint8, loom::ReduceOp{}, options));
      !failure.empty())
    return what + ": " + failure;
  if (loom::Status st = runReference(runsOf(plans, reference), loomUint8, loom::ReduceOp{}); !st.ok())
    return what + ": " + st.message();
  if (std::string diff = compareRuns(emulated, reference); !diff.empty()) return what + ": " + diff;
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < groups[r].size(); ++i) {
      const Msg& m = groups[r][i];
      if (m.isSend) continue;
      std::string f = checkPattern(emulated[r].buffers[loom::kFirstP2pBuffer + i], m.bytes, m.tag, m.peer, 0,
                                   fmt::format("rank {} op {} from rank {}", r, i, m.peer));
      if (!f.empty()) return what + ": " + f;
    }
  return "";
}

}  // namespace loomgpu
