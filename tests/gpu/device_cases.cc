#include "device_cases.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <stdexcept>

#include "gpu_support.h"

namespace loomgpu {
namespace {

using loomtest::Case;
using loomtest::CaseResult;
using loomtest::Coll;
using loomtest::Op;
using loomtest::RankContext;

// Elements of this rank's send and receive buffers (every rank passes full-size rooted buffers, as
// tests/api does), and for in-place runs the block where the smaller one sits inside the larger.
struct Layout {
  size_t sendElems = 0;
  size_t recvElems = 0;
  size_t inPlaceBlock = 0;
};

Layout layoutFor(const Case& c, int nranks, int rank) {
  const size_t n = static_cast<size_t>(nranks), k = c.count;
  switch (c.coll) {
    case Coll::AllGather: return {k, n * k, static_cast<size_t>(rank)};
    case Coll::ReduceScatter: return {n * k, k, static_cast<size_t>(rank)};
    case Coll::AlltoAll: return {n * k, n * k, 0};
    case Coll::Gather: return {k, n * k, static_cast<size_t>(c.root)};
    case Coll::Scatter: return {n * k, k, static_cast<size_t>(c.root)};
    default: return {k, k, 0};
  }
}

bool runsInPlace(const Case& c, int rank) {
  if (!c.inPlace || !loomtest::supportsInPlace(c.coll)) return false;
  if (c.coll == Coll::Gather || c.coll == Coll::Scatter) return rank == c.root;  // others: separate buffers
  return true;
}

void fillInput(const Case& c, const RankContext& ctx, std::vector<uint8_t>& send) {
  const size_t es = loomtest::dtypeSize(c.dtype);
  if (loomtest::isReduction(c.coll)) {
    loomtest::ReduceInputs in{c.dtype, c.op, ctx.nranks, c.seed};
    loomtest::fillReduceInput(in, ctx.rank, 0, send.size() / es, send.data());
    return;
  }
  const bool rootOnly = c.coll == Coll::Broadcast || c.coll == Coll::Scatter;
  if (rootOnly && ctx.rank != c.root) return;
  loomtest::fillPattern(send.data(), send.size(), c.seed, rootOnly ? c.root : ctx.rank, 0);
}

void appendProblem(std::string& text, const std::string& problem) {
  if (problem.empty()) return;
  if (!text.empty()) text += "; ";
  text += problem;
}

std::string patternProblem(const uint8_t* got, size_t bytes, uint64_t seed, int srcRank, uint64_t firstByte,
                           const std::string& what) {
  size_t bad = 0;
  const size_t at = loomtest::findPatternMismatch(got, bytes, seed, srcRank, firstByte, &bad);
  if (at == SIZE_MAX) return "";
  return what + ": byte " + std::to_string(at) + " is wrong, " + std::to_string(bad) + " of " +
         std::to_string(bytes) + " bytes differ from rank " + std::to_string(srcRank) + "'s data";
}

std::string checkOutput(const Case& c, const RankContext& ctx, const uint8_t* recv, const uint8_t* wholeInPlace) {
  const size_t es = loomtest::dtypeSize(c.dtype), bytes = c.count * es;
  const int n = ctx.nranks, rank = ctx.rank;
  loomtest::ReduceInputs in{c.dtype, c.op, n, c.seed};
  std::string text;
  switch (c.coll) {
    case Coll::AllReduce: return loomtest::checkReduced(in, 0, c.count, recv);
    case Coll::Reduce: return rank == c.root ? loomtest::checkReduced(in, 0, c.count, recv) : "";
    case Coll::ReduceScatter: return loomtest::checkReduced(in, static_cast<size_t>(rank) * c.count, c.count, recv);
    case Coll::Broadcast: return patternProblem(recv, bytes, c.seed, c.root, 0, "recvbuff");
    case Coll::AllGather:
    case Coll::Gather:
      if (c.coll == Coll::Gather && rank != c.root) return "";
      for (int r = 0; r < n; ++r)
        appendProblem(text, patternProblem(recv + bytes * r, bytes, c.seed, r, 0, "block " + std::to_string(r)));
      return text;
    case Coll::AlltoAll:
      for (int r = 0; r < n; ++r)
        appendProblem(text, patternProblem(recv + bytes * r, bytes, c.seed, r, bytes * rank,
                                           "block from rank " + std::to_string(r)));
      return text;
    case Coll::Scatter:
      text = patternProblem(recv, bytes, c.seed, c.root, bytes * rank, "recvbuff");
      if (wholeInPlace)  // in place, the root's whole buffer keeps its contents
        appendProblem(text, patternProblem(wholeInPlace, bytes * n, c.seed, c.root, 0, "root buffer"));
      return text;
    case Coll::SendRecv: {
      const int prev = (rank + n - 1) % n;
      return patternProblem(recv, bytes, c.seed, prev, 0, "recvbuff from rank " + std::to_string(prev));
    }
  }
  return "unknown collective";
}

// The reduction operator of a case; a PreMulSum scalar is kept in device memory when asked (in
// `deviceScalar`, 8 bytes allocated once per run).
class CaseOp {
 public:
  CaseOp(const Case& c, loomComm_t comm, DeviceBuffer* deviceScalar) : comm_(comm) {
    if (c.op != Op::PreMulSum) {
      op_ = loomtest::builtinOp(c.op);
      return;
    }
    alignas(8) uint8_t scalar[8] = {};
    loomtest::preMulScalar(c.dtype, scalar);
    void* where = scalar;
    loomScalarResidence_t residence = loomScalarHostImmediate;
    if (deviceScalar) {
      deviceScalar->upload(scalar, sizeof scalar);
      where = deviceScalar->data();
      residence = loomScalarDevice;
    }
    created_ = loomRedOpCreatePreMulSum(&op_, where, c.dtype, residence, comm);
    made_ = created_ == loomSuccess;
  }
  ~CaseOp() {
    if (made_) loomRedOpDestroy(op_, comm_);
  }
  loomRedOp_t op() const { return op_; }
  loomResult_t created() const { return created_; }

 private:
  loomComm_t comm_;
  loomRedOp_t op_ = loomSum;
  loomResult_t created_ = loomSuccess;
  bool made_ = false;
};

// One rank's device memory for a whole run, sized for its largest case.
struct RunBuffers {
  RunBuffers(size_t sendBytes, size_t recvBytes, uint64_t seed)
      : send(sendBytes, seed), recv(recvBytes, seed + 100), scalar(8, seed + 200) {}
  DeviceBuffer send;    // out of place: the send buffer
  DeviceBuffer recv;    // out of place: the receive buffer; in place: the one buffer
  DeviceBuffer scalar;  // a PreMulSum scalar in device memory
};

loomResult_t callCollective(const Case& c, const RankContext& ctx, const void* send, void* recv, loomRedOp_t op,
                            cudaStream_t cs) {
  auto stream = reinterpret_cast<loomStream_t>(cs);
  loomComm_t comm = ctx.comm;
  switch (c.coll) {
    case Coll::AllReduce: return loomAllReduce(send, recv, c.count, c.dtype, op, comm, stream);
    case Coll::Reduce: return loomReduce(send, recv, c.count, c.dtype, op, c.root, comm, stream);
    case Coll::ReduceScatter: return loomReduceScatter(send, recv, c.count, c.dtype, op, comm, stream);
    case Coll::Broadcast: return loomBroadcast(send, recv, c.count, c.dtype, c.root, comm, stream);
    case Coll::AllGather: return loomAllGather(send, recv, c.count, c.dtype, comm, stream);
    case Coll::AlltoAll: return loomAlltoAll(send, recv, c.count, c.dtype, comm, stream);
    case Coll::Gather: return loomGather(send, recv, c.count, c.dtype, c.root, comm, stream);
    case Coll::Scatter: return loomScatter(send, recv, c.count, c.dtype, c.root, comm, stream);
    case Coll::SendRecv: {
      const int n = ctx.nranks;
      loomResult_t r = loomGroupStart();
      if (r != loomSuccess) return r;
      loomResult_t rs = loomSend(send, c.count, c.dtype, (ctx.rank + 1) % n, comm, stream);
      loomResult_t rr = loomRecv(recv, c.count, c.dtype, (ctx.rank + n - 1) % n, comm, stream);
      loomResult_t re = loomGroupEnd();
      return rs != loomSuccess ? rs : rr != loomSuccess ? rr : re;
    }
  }
  return loomInvalidArgument;
}

// The bytes a case's buffers take on this rank: (send, receive) out of place; in place, the one
// buffer counts as the receive buffer.
std::pair<size_t, size_t> caseBytes(const Case& c, const RankContext& ctx) {
  const size_t es = loomtest::dtypeSize(c.dtype);
  const Layout layout = layoutFor(c, ctx.nranks, ctx.rank);
  if (runsInPlace(c, ctx.rank)) return {0, std::max(layout.sendElems, layout.recvElems) * es};
  return {layout.sendElems * es, layout.recvElems * es};
}

CaseResult runDeviceCase(RankContext& ctx, const Case& c, cudaStream_t stream, const DeviceRunOptions& options,
                         RunBuffers& buffers) {
  ctx.note("device " + loomtest::describeCase(c, ctx));
  const size_t es = loomtest::dtypeSize(c.dtype), bytes = c.count * es;
  const Layout layout = layoutFor(c, ctx.nranks, ctx.rank);
  const bool inPlace = runsInPlace(c, ctx.rank);
  std::vector<uint8_t> sendImage(layout.sendElems * es);
  fillInput(c, ctx, sendImage);

  const auto [sendBytes, recvBytes] = caseBytes(c, ctx);
  DeviceBuffer* one = inPlace ? &buffers.recv : nullptr;
  DeviceBuffer* sendBuf = inPlace ? nullptr : &buffers.send;
  DeviceBuffer* recvBuf = inPlace ? nullptr : &buffers.recv;
  uint8_t* sendDev = nullptr;
  uint8_t* recvDev = nullptr;
  size_t recvOffset = 0;
  if (inPlace) {
    const size_t sendOffset = layout.sendElems < layout.recvElems ? layout.inPlaceBlock * bytes : 0;
    recvOffset = layout.recvElems < layout.sendElems ? layout.inPlaceBlock * bytes : 0;
    one->prepare(recvBytes, c.seed + ctx.rank);
    one->upload(sendImage.data(), sendImage.size(), sendOffset);
    sendDev = one->data() + sendOffset;
    recvDev = one->data() + recvOffset;
  } else {
    sendBuf->prepare(sendBytes, c.seed + ctx.rank);
    recvBuf->prepare(recvBytes, c.seed + 100 + ctx.rank);
    sendBuf->upload(sendImage.data(), sendImage.size());
    sendDev = sendBuf->data();
    recvDev = recvBuf->data();
  }

  CaseOp op(c, ctx.comm, options.deviceScalars ? &buffers.scalar : nullptr);
  if (op.created() != loomSuccess)
    return {loomtest::callFailure("loomRedOpCreatePreMulSum", op.created(), ctx.comm), true};
  loomResult_t r = callCollective(c, ctx, sendDev, recvDev, op.op(), stream);
  if (r != loomSuccess) return {loomtest::callFailure(loomtest::collName(c.coll), r, ctx.comm), true};
  cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  // A plan kernel whose lane failed (timed out, say) ends normally as far as the stream is concerned:
  // its failure reaches the communicator only when a finished launch is looked at, at the next call,
  // and the run's last case has none. Asked here, it is reported as what it is, not as wrong data.
  loomResult_t async = loomSuccess;
  const loomResult_t asked = loomCommGetAsyncError(ctx.comm, &async);
  if (asked != loomSuccess) return {loomtest::callFailure("loomCommGetAsyncError", asked, ctx.comm), true};
  if (async != loomSuccess && async != loomInProgress)
    return {loomtest::callFailure("the call (loomCommGetAsyncError after the stream)", async, ctx.comm), true};

  std::string text;
  if (inPlace) {
    std::vector<uint8_t> all = one->download();
    const bool scatterRoot = c.coll == Coll::Scatter;
    appendProblem(text, checkOutput(c, ctx, all.data() + recvOffset, scatterRoot ? all.data() : nullptr));
    appendProblem(text, one->checkGuards("buffer"));
  } else {
    std::vector<uint8_t> recv = recvBuf->download();
    appendProblem(text, checkOutput(c, ctx, recv.data(), nullptr));
    if (sendBuf->download() != sendImage) appendProblem(text, "sendbuff was modified by the call");
    appendProblem(text, sendBuf->checkGuards("sendbuff"));
    appendProblem(text, recvBuf->checkGuards("recvbuff"));
  }
  return {text, false};
}

}  // namespace

std::string meetOnTheHost(RankContext& ctx) {
  int one = 1, all = 0;
  const loomResult_t met = loomAllReduce(&one, &all, 1, loomInt32, loomSum, ctx.comm, nullptr);
  if (met != loomSuccess) return loomtest::callFailure("loomAllReduce (the ranks' meeting)", met, ctx.comm);
  return all == ctx.nranks ? "" : "the ranks' meeting counted " + std::to_string(all) + " ranks";
}

std::string withStreamOnGpu0(RankContext& ctx, const StreamBody& body) {
  cudaCheck(cudaSetDevice(0), "cudaSetDevice");
  cudaStream_t stream = nullptr;
  cudaCheck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  std::string problems = body(ctx, stream);
  cudaStreamDestroy(stream);
  return problems;
}

std::string runDeviceCases(RankContext& ctx, const std::vector<Case>& cases, int device,
                           const DeviceRunOptions& options) {
  cudaCheck(cudaSetDevice(device), "cudaSetDevice");
  cudaStream_t stream = nullptr;
  if (!options.useNullStream) cudaCheck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  size_t sendMost = 0, recvMost = 0;
  for (const Case& c : cases) {
    const auto [send, recv] = caseBytes(c, ctx);
    sendMost = std::max(sendMost, send);
    recvMost = std::max(recvMost, recv);
  }
  RunBuffers buffers(sendMost, recvMost, static_cast<uint64_t>(ctx.rank) * 7919);
  std::string out;
  const std::string met = meetOnTheHost(ctx);  // every rank's allocations are done before any launch
  if (!met.empty()) return met;
  int failures = 0;
  constexpr int kMaxFailures = 8;
  for (const Case& c : cases) {
    CaseResult r = runDeviceCase(ctx, c, stream, options, buffers);
    if (r.failure.empty()) continue;
    if (failures++ < kMaxFailures) out += "\n  " + loomtest::describeCase(c, ctx) + ": " + r.failure;
    if (r.fatal) {
      loomCommAbort(ctx.comm);
      ctx.comm = nullptr;
      out += "\n  (stopped: the call failed, communicator aborted)";
      break;
    }
  }
  // Meet again before `buffers` go: cudaFree synchronizes the device and, while it waits, holds back
  // every other thread's launches, so a rank that frees while a peer has yet to launch its last case
  // stalls that launch until the lanes waiting for it time out (docs/ARCHITECTURE.md's hazards). The
  // meeting is a host collective: each rank joins it after its last stream synchronization.
  if (ctx.comm) {
    const std::string metAtEnd = meetOnTheHost(ctx);
    if (!metAtEnd.empty()) out += "\n  (at the end) " + metAtEnd;
  }
  if (stream) cudaStreamDestroy(stream);
  if (failures > kMaxFailures) out += "\n  ... and " + std::to_string(failures - kMaxFailures) + " more";
  if (failures > 0) out = std::to_string(failures) + " of " + std::to_string(cases.size()) + " device cases failed:" + out;
  return out;
}

}  // namespace loomgpu
