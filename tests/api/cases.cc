#include "cases.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <sstream>

#include "buffers.h"

namespace loomtest {
namespace {

// Collects this rank's problems with one case.
class Checks {
 public:
  void add(const std::string& problem) {
    if (problem.empty()) return;
    if (!text_.empty()) text_ += "; ";
    text_ += problem;
  }
  void guards(const GuardedBuffer& b, const char* name) { add(b.checkGuards(name)); }
  // The bytes that a send buffer held before the call must still be there.
  void unchanged(const std::vector<uint8_t>& before, const uint8_t* now, const char* name) {
    if (before.empty() || std::memcmp(before.data(), now, before.size()) == 0) return;
    size_t first = 0, bad = 0;
    for (size_t i = 0; i < before.size(); ++i)
      if (before[i] != now[i]) {
        if (bad++ == 0) first = i;
      }
    std::ostringstream os;
    os << name << " modified by the call: " << bad << " byte(s) changed, first at byte " << first;
    add(os.str());
  }
  // bytes at got must equal the movement pattern of (seed, srcRank) from firstByte on.
  void pattern(const uint8_t* got, size_t bytes, uint64_t seed, int srcRank, uint64_t firstByte, size_t elemSize,
               const std::string& what) {
    size_t bad = 0;
    size_t at = findPatternMismatch(got, bytes, seed, srcRank, firstByte, &bad);
    if (at == SIZE_MAX) return;
    std::ostringstream os;
    os << what << ": element " << at / elemSize << " (byte " << at << ") is wrong, " << bad << " of " << bytes
       << " bytes differ from rank " << srcRank << "'s data";
    add(os.str());
  }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

std::vector<uint8_t> snapshot(const uint8_t* p, size_t bytes) { return std::vector<uint8_t>(p, p + bytes); }

// The loomRedOp_t for a case; PreMulSum ops are made here and destroyed by the destructor.
class CaseOp {
 public:
  CaseOp(const Case& c, loomComm_t comm) : comm_(comm) {
    if (c.op != Op::PreMulSum) {
      op_ = builtinOp(c.op);
      return;
    }
    alignas(8) uint8_t scalar[8] = {};
    preMulScalar(c.dtype, scalar);
    created_ = loomRedOpCreatePreMulSum(&op_, scalar, c.dtype, loomScalarHostImmediate, comm);
    // Host-immediate scalars are read at creation: clobbering ours afterwards must not matter.
    std::memset(scalar, 0x7b, sizeof scalar);
    made_ = created_ == loomSuccess;
  }
  ~CaseOp() {
    if (made_) loomRedOpDestroy(op_, comm_);
  }
  loomRedOp_t op() const { return op_; }
  loomResult_t createResult() const { return created_; }
  // Destroys now and reports a failure; the destructor then does nothing.
  loomResult_t destroy() {
    if (!made_) return loomSuccess;
    made_ = false;
    return loomRedOpDestroy(op_, comm_);
  }

 private:
  loomComm_t comm_;
  loomRedOp_t op_ = loomSum;
  loomResult_t created_ = loomSuccess;
  bool made_ = false;
};

CaseResult fatal(const char* call, loomResult_t r, loomComm_t comm) { return {callFailure(call, r, comm), true}; }

#define LT_CASE_CALL(expr)                                       \
  do {                                                           \
    loomResult_t lt_r_ = (expr);                                 \
    if (lt_r_ != loomSuccess) return fatal(#expr, lt_r_, comm);  \
  } while (0)

CaseResult runAllReduce(RankContext& ctx, const Case& c, loomRedOp_t op) {
  loomComm_t comm = ctx.comm;
  const size_t bytes = c.count * dtypeSize(c.dtype);
  ReduceInputs in{c.dtype, c.op, ctx.nranks, c.seed};
  Checks k;
  if (c.inPlace) {
    GuardedBuffer buf(bytes, c.seed);
    fillReduceInput(in, ctx.rank, 0, c.count, buf.data());
    LT_CASE_CALL(loomAllReduce(buf.data(), buf.data(), c.count, c.dtype, op, comm, nullptr));
    k.add(checkReduced(in, 0, c.count, buf.data()));
    k.guards(buf, "buffer");
  } else {
    GuardedBuffer send(bytes, c.seed), recv(bytes, c.seed + 1);
    fillReduceInput(in, ctx.rank, 0, c.count, send.data());
    auto before = snapshot(send.data(), bytes);
    LT_CASE_CALL(loomAllReduce(send.data(), recv.data(), c.count, c.dtype, op, comm, nullptr));
    k.add(checkReduced(in, 0, c.count, recv.data()));
    k.unchanged(before, send.data(), "sendbuff");
    k.guards(send, "sendbuff");
    k.guards(recv, "recvbuff");
  }
  return {k.text(), false};
}

CaseResult runReduce(RankContext& ctx, const Case& c, loomRedOp_t op) {
  loomComm_t comm = ctx.comm;
  const size_t bytes = c.count * dtypeSize(c.dtype);
  ReduceInputs in{c.dtype, c.op, ctx.nranks, c.seed};
  const bool isRoot = ctx.rank == c.root;
  Checks k;
  if (c.inPlace) {
    GuardedBuffer buf(bytes, c.seed);
    fillReduceInput(in, ctx.rank, 0, c.count, buf.data());
    LT_CASE_CALL(loomReduce(buf.data(), buf.data(), c.count, c.dtype, op, c.root, comm, nullptr));
    if (isRoot) k.add(checkReduced(in, 0, c.count, buf.data()));
    k.guards(buf, "buffer");
  } else {
    GuardedBuffer send(bytes, c.seed), recv(bytes, c.seed + 1);
    fillReduceInput(in, ctx.rank, 0, c.count, send.data());
    auto before = snapshot(send.data(), bytes);
    LT_CASE_CALL(loomReduce(send.data(), recv.data(), c.count, c.dtype, op, c.root, comm, nullptr));
    if (isRoot) k.add(checkReduced(in, 0, c.count, recv.data()));
    k.unchanged(before, send.data(), "sendbuff");
    k.guards(send, "sendbuff");
    k.guards(recv, "recvbuff");
  }
  return {k.text(), false};
}

CaseResult runReduceScatter(RankContext& ctx, const Case& c, loomRedOp_t op) {
  loomComm_t comm = ctx.comm;
  const size_t es = dtypeSize(c.dtype);
  const size_t bytes = c.count * es;
  const size_t total = c.count * static_cast<size_t>(ctx.nranks);
  ReduceInputs in{c.dtype, c.op, ctx.nranks, c.seed};
  const size_t myFirst = static_cast<size_t>(ctx.rank) * c.count;
  Checks k;
  if (c.inPlace) {
    GuardedBuffer buf(total * es, c.seed);
    fillReduceInput(in, ctx.rank, 0, total, buf.data());
    uint8_t* recv = buf.data() + myFirst * es;
    LT_CASE_CALL(loomReduceScatter(buf.data(), recv, c.count, c.dtype, op, comm, nullptr));
    k.add(checkReduced(in, myFirst, c.count, recv));
    k.guards(buf, "buffer");
  } else {
    GuardedBuffer send(total * es, c.seed), recv(bytes, c.seed + 1);
    fillReduceInput(in, ctx.rank, 0, total, send.data());
    auto before = snapshot(send.data(), total * es);
    LT_CASE_CALL(loomReduceScatter(send.data(), recv.data(), c.count, c.dtype, op, comm, nullptr));
    k.add(checkReduced(in, myFirst, c.count, recv.data()));
    k.unchanged(before, send.data(), "sendbuff");
    k.guards(send, "sendbuff");
    k.guards(recv, "recvbuff");
  }
  return {k.text(), false};
}

CaseResult runBroadcast(RankContext& ctx, const Case& c) {
  loomComm_t comm = ctx.comm;
  const size_t es = dtypeSize(c.dtype);
  const size_t bytes = c.count * es;
  const bool isRoot = ctx.rank == c.root;
  Checks k;
  if (c.inPlace) {
    GuardedBuffer buf(bytes, c.seed + ctx.rank);
    if (isRoot) fillPattern(buf.data(), bytes, c.seed, c.root, 0);
    LT_CASE_CALL(loomBroadcast(buf.data(), buf.data(), c.count, c.dtype, c.root, comm, nullptr));
    k.pattern(buf.data(), bytes, c.seed, c.root, 0, es, "buffer");
    k.guards(buf, "buffer");
  } else {
    GuardedBuffer send(bytes, c.seed + ctx.rank), recv(bytes, c.seed + 100 + ctx.rank);
    if (isRoot) fillPattern(send.data(), bytes, c.seed, c.root, 0);
    auto before = snapshot(send.data(), bytes);
    LT_CASE_CALL(loomBroadcast(send.data(), recv.data(), c.count, c.dtype, c.root, comm, nullptr));
    k.pattern(recv.data(), bytes, c.seed, c.root, 0, es, "recvbuff");
    k.unchanged(before, send.data(), "sendbuff");
    k.guards(send, "sendbuff");
    k.guards(recv, "recvbuff");
  }
  return {k.text(), false};
}

CaseResult runAllGather(RankContext& ctx, const Case& c) {
  loomComm_t comm = ctx.comm;
  const size_t es = dtypeSize(c.dtype);
  const size_t bytes = c.count * es;
  const int n = ctx.nranks;
  Checks k;
  GuardedBuffer recv(bytes * n, c.seed + 100 + ctx.rank);
  std::vector<uint8_t> before;
  std::optional<GuardedBuffer> send;
  const uint8_t* sendPtr;
  if (c.inPlace) {
    uint8_t* mine = recv.data() + bytes * ctx.rank;
    fillPattern(mine, bytes, c.seed, ctx.rank, 0);
    sendPtr = mine;
  } else {
    send.emplace(bytes, c.seed + ctx.rank);
    fillPattern(send->data(), bytes, c.seed, ctx.rank, 0);
    before = snapshot(send->data(), bytes);
    sendPtr = send->data();
  }
  LT_CASE_CALL(loomAllGather(sendPtr, recv.data(), c.count, c.dtype, comm, nullptr));
  for (int r = 0; r < n; ++r)
    k.pattern(recv.data() + bytes * r, bytes, c.seed, r, 0, es, "recvbuff block " + std::to_string(r));
  k.guards(recv, "recvbuff");
  if (send) {
    k.unchanged(before, send->data(), "sendbuff");
    k.guards(*send, "sendbuff");
  }
  return {k.text(), false};
}

CaseResult runAlltoAll(RankContext& ctx, const Case& c) {
  loomComm_t comm = ctx.comm;
  const size_t es = dtypeSize(c.dtype);
  const size_t bytes = c.count * es;
  const int n = ctx.nranks;
  Checks k;
  GuardedBuffer send(bytes * n, c.seed + ctx.rank), recv(bytes * n, c.seed + 100 + ctx.rank);
  fillPattern(send.data(), bytes * n, c.seed, ctx.rank, 0);  // block j goes to rank j
  auto before = snapshot(send.data(), bytes * n);
  LT_CASE_CALL(loomAlltoAll(send.data(), recv.data(), c.count, c.dtype, comm, nullptr));
  for (int r = 0; r < n; ++r)
    k.pattern(recv.data() + bytes * r, bytes, c.seed, r, bytes * ctx.rank, es,
              "recvbuff block from rank " + std::to_string(r));
  k.unchanged(before, send.data(), "sendbuff");
  k.guards(send, "sendbuff");
  k.guards(recv, "recvbuff");
  return {k.text(), false};
}

CaseResult runGather(RankContext& ctx, const Case& c) {
  loomComm_t comm = ctx.comm;
  const size_t es = dtypeSize(c.dtype);
  const size_t bytes = c.count * es;
  const int n = ctx.nranks;
  const bool isRoot = ctx.rank == c.root;
  Checks k;
  // Every rank passes a full-size receive buffer; only the root's is significant.
  GuardedBuffer recv(bytes * n, c.seed + 100 + ctx.rank);
  std::optional<GuardedBuffer> send;
  std::vector<uint8_t> before;
  const uint8_t* sendPtr;
  if (c.inPlace && isRoot) {
    uint8_t* mine = recv.data() + bytes * ctx.rank;
    fillPattern(mine, bytes, c.seed, ctx.rank, 0);
    sendPtr = mine;
  } else {
    send.emplace(bytes, c.seed + ctx.rank);
    fillPattern(send->data(), bytes, c.seed, ctx.rank, 0);
    before = snapshot(send->data(), bytes);
    sendPtr = send->data();
  }
  LT_CASE_CALL(loomGather(sendPtr, recv.data(), c.count, c.dtype, c.root, comm, nullptr));
  if (isRoot)
    for (int r = 0; r < n; ++r)
      k.pattern(recv.data() + bytes * r, bytes, c.seed, r, 0, es, "recvbuff block " + std::to_string(r));
  k.guards(recv, "recvbuff");
  if (send) {
    k.unchanged(before, send->data(), "sendbuff");
    k.guards(*send, "sendbuff");
  }
  return {k.text(), false};
}

CaseResult runScatter(RankContext& ctx, const Case& c) {
  loomComm_t comm = ctx.comm;
  const size_t es = dtypeSize(c.dtype);
  const size_t bytes = c.count * es;
  const int n = ctx.nranks;
  const bool isRoot = ctx.rank == c.root;
  Checks k;
  // Every rank passes a full-size send buffer; only the root's is significant.
  GuardedBuffer send(bytes * n, c.seed + ctx.rank);
  if (isRoot) fillPattern(send.data(), bytes * n, c.seed, c.root, 0);  // block j goes to rank j
  std::optional<GuardedBuffer> recv;
  uint8_t* recvPtr;
  std::vector<uint8_t> before;
  if (c.inPlace && isRoot) {
    recvPtr = send.data() + bytes * ctx.rank;
  } else {
    recv.emplace(bytes, c.seed + 100 + ctx.rank);
    recvPtr = recv->data();
    before = snapshot(send.data(), bytes * n);
  }
  LT_CASE_CALL(loomScatter(send.data(), recvPtr, c.count, c.dtype, c.root, comm, nullptr));
  k.pattern(recvPtr, bytes, c.seed, c.root, bytes * ctx.rank, es, "recvbuff");
  if (c.inPlace && isRoot) {
    for (int r = 0; r < n; ++r)  // in place, the root's whole buffer keeps its contents
      k.pattern(send.data() + bytes * r, bytes, c.seed, c.root, bytes * r, es,
                "root buffer block " + std::to_string(r));
  } else {
    k.unchanged(before, send.data(), "sendbuff");
    k.guards(*recv, "recvbuff");
  }
  k.guards(send, "sendbuff");
  return {k.text(), false};
}

CaseResult runSendRecvRing(RankContext& ctx, const Case& c) {
  loomComm_t comm = ctx.comm;
  const size_t es = dtypeSize(c.dtype);
  const size_t bytes = c.count * es;
  const int n = ctx.nranks;
  const int next = (ctx.rank + 1) % n, prev = (ctx.rank + n - 1) % n;
  Checks k;
  GuardedBuffer send(bytes, c.seed + ctx.rank), recv(bytes, c.seed + 100 + ctx.rank);
  fillPattern(send.data(), bytes, c.seed, ctx.rank, 0);
  auto before = snapshot(send.data(), bytes);
  LT_CASE_CALL(loomGroupStart());
  loomResult_t rs = loomSend(send.data(), c.count, c.dtype, next, comm, nullptr);
  loomResult_t rr = loomRecv(recv.data(), c.count, c.dtype, prev, comm, nullptr);
  loomResult_t re = loomGroupEnd();
  if (rs != loomSuccess) return fatal("loomSend (in group)", rs, comm);
  if (rr != loomSuccess) return fatal("loomRecv (in group)", rr, comm);
  if (re != loomSuccess) return fatal("loomGroupEnd", re, comm);
  k.pattern(recv.data(), bytes, c.seed, prev, 0, es, "recvbuff from rank " + std::to_string(prev));
  k.unchanged(before, send.data(), "sendbuff");
  k.guards(send, "sendbuff");
  k.guards(recv, "recvbuff");
  return {k.text(), false};
}

}  // namespace

const char* collName(Coll coll) {
  switch (coll) {
    case Coll::AllReduce: return "AllReduce";
    case Coll::Broadcast: return "Broadcast";
    case Coll::Reduce: return "Reduce";
    case Coll::AllGather: return "AllGather";
    case Coll::ReduceScatter: return "ReduceScatter";
    case Coll::AlltoAll: return "AlltoAll";
    case Coll::Gather: return "Gather";
    case Coll::Scatter: return "Scatter";
    case Coll::SendRecv: return "SendRecvRing";
  }
  return "?";
}

bool isReduction(Coll coll) {
  return coll == Coll::AllReduce || coll == Coll::Reduce || coll == Coll::ReduceScatter;
}

bool isRooted(Coll coll) {
  return coll == Coll::Broadcast || coll == Coll::Reduce || coll == Coll::Gather || coll == Coll::Scatter;
}

bool supportsInPlace(Coll coll) { return coll != Coll::AlltoAll && coll != Coll::SendRecv; }

std::string describeCase(const Case& c, const RankContext& ctx) {
  std::ostringstream os;
  os << collName(c.coll) << " dtype=" << dtypeName(c.dtype);
  if (isReduction(c.coll)) os << " op=" << opName(c.op);
  os << " count=" << c.count << " inplace=" << (c.inPlace ? 1 : 0);
  if (isRooted(c.coll)) os << " root=" << c.root;
  os << " " << ctx.where();
  return os.str();
}

CaseResult runCase(RankContext& ctx, const Case& c) {
  ctx.note(describeCase(c, ctx));
  if (isReduction(c.coll)) {
    loomComm_t comm = ctx.comm;
    CaseOp op(c, comm);
    if (op.createResult() != loomSuccess) return fatal("loomRedOpCreatePreMulSum", op.createResult(), comm);
    CaseResult r;
    switch (c.coll) {
      case Coll::AllReduce: r = runAllReduce(ctx, c, op.op()); break;
      case Coll::Reduce: r = runReduce(ctx, c, op.op()); break;
      default: r = runReduceScatter(ctx, c, op.op()); break;
    }
    if (r.fatal) return r;
    loomResult_t d = op.destroy();
    if (d != loomSuccess) return fatal("loomRedOpDestroy", d, comm);
    return r;
  }
  switch (c.coll) {
    case Coll::Broadcast: return runBroadcast(ctx, c);
    case Coll::AllGather: return runAllGather(ctx, c);
    case Coll::AlltoAll: return runAlltoAll(ctx, c);
    case Coll::Gather: return runGather(ctx, c);
    case Coll::Scatter: return runScatter(ctx, c);
    case Coll::SendRecv: return runSendRecvRing(ctx, c);
    default: return {"unknown collective", true};
  }
}

std::string runCases(RankContext& ctx, const std::vector<Case>& cases, int maxFailures) {
  std::string out;
  int failures = 0;
  for (const Case& c : cases) {
    CaseResult r = runCase(ctx, c);
    if (r.failure.empty()) continue;
    if (failures < maxFailures) out += "\n  " + describeCase(c, ctx) + ": " + r.failure;
    ++failures;
    if (r.fatal) {
      // Peers may be waiting for this rank inside the next call; aborting lets them fail too.
      loomCommAbort(ctx.comm);
      ctx.comm = nullptr;
      out += "\n  (stopped: the call failed, communicator aborted)";
      break;
    }
  }
  if (failures > maxFailures) out += "\n  ... and " + std::to_string(failures - maxFailures) + " more failing cases";
  if (failures > 0) out = std::to_string(failures) + " of " + std::to_string(cases.size()) + " cases failed:" + out;
  return out;
}

std::vector<Case> buildCases(const MatrixSpec& spec, int nranks) {
  std::vector<Case> cases;
  uint64_t seed = mix64(static_cast<uint64_t>(nranks) * 7919u);
  int rotatingRoot = 0;
  int shift = 0;
  for (Coll coll : spec.colls) {
    std::vector<std::pair<loomDataType_t, Op>> pairs;
    if (!isReduction(coll)) {
      for (auto dt : spec.dtypes) pairs.push_back({dt, Op::Sum});
    } else if (spec.crossDtypeOp) {
      for (auto dt : spec.dtypes)
        for (Op op : spec.ops) pairs.push_back({dt, op});
    }
    for (size_t count : spec.counts) {
      for (bool inPlace : spec.inPlace) {
        if (inPlace && !supportsInPlace(coll)) continue;
        std::vector<int> roots;
        if (!isRooted(coll))
          roots = {0};
        else if (spec.everyRoot)
          for (int r = 0; r < nranks; ++r) roots.push_back(r);
        else
          roots = {-1};  // rotate per case
        for (int root : roots) {
          std::vector<std::pair<loomDataType_t, Op>> these = pairs;
          if (isReduction(coll) && !spec.crossDtypeOp) {
            size_t d = spec.dtypes.size(), o = spec.ops.size();
            for (size_t i = 0; i < std::max(d, o); ++i)
              these.push_back({spec.dtypes[i % d], spec.ops[(i + shift) % o]});
            ++shift;
          }
          for (auto [dt, op] : these) {
            Case c;
            c.coll = coll;
            c.dtype = dt;
            c.op = op;
            c.count = count;
            c.inPlace = inPlace;
            c.root = root >= 0 ? root : (rotatingRoot++ % nranks);
            c.seed = ++seed;
            cases.push_back(c);
          }
        }
      }
    }
  }
  return cases;
}

}  // namespace loomtest

#undef LT_CASE_CALL  // unity builds: the sources compiled after this one do not see it
