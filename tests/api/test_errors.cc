// Every bad argument returns loomInvalidArgument with a non-empty loomGetLastError message, moves no
// data, and leaves the communicator usable: null comm, null buffers with count > 0, dtype 99, op 99
// and -1, roots -1 and n, peers -1 and n, and counts whose byte size overflows size_t.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <vector>

#include "buffers.h"
#include "cases.h"
#include "launch_config.h"

namespace loomtest {
namespace {

// Tries invalid calls, each of which must fail alone on this rank before touching any peer.
class BadCallChecker {
 public:
  BadCallChecker(RankContext& ctx, GuardedBuffer& a, GuardedBuffer& b) : ctx_(ctx), a_(a), b_(b) {
    beforeA_.assign(a.data(), a.data() + a.size());
    beforeB_.assign(b.data(), b.data() + b.size());
  }

  void expectInvalid(const std::string& what, const std::function<loomResult_t()>& call, loomComm_t errComm) {
    ctx_.note("bad call: " + what);
    ++checked_;
    loomResult_t r = call();
    if (r != loomInvalidArgument) {
      fail(what + ": returned " + std::to_string(r) + " (" + safe(loomGetErrorString(r)) + "), expected loomInvalidArgument");
      return;
    }
    const char* msg = loomGetLastError(errComm);
    if (msg == nullptr || *msg == '\0') fail(what + ": loomGetLastError(" + (errComm ? "comm" : "NULL") + ") is empty");
    if (std::memcmp(beforeA_.data(), a_.data(), a_.size()) != 0 || std::memcmp(beforeB_.data(), b_.data(), b_.size()) != 0) {
      fail(what + ": data moved although the call was rejected");
      beforeA_.assign(a_.data(), a_.data() + a_.size());
      beforeB_.assign(b_.data(), b_.data() + b_.size());
    }
    if (!a_.checkGuards("a").empty() || !b_.checkGuards("b").empty()) fail(what + ": wrote outside its buffers");
  }

  std::string result() const {
    if (failures_.empty()) return "";
    return std::to_string(failures_.size()) + " of " + std::to_string(checked_) + " bad calls misbehaved:" + failures_text_;
  }

 private:
  static std::string safe(const char* s) { return s ? s : "(null)"; }
  void fail(const std::string& s) {
    failures_.push_back(s);
    if (failures_.size() <= 40) failures_text_ += "\n  " + s;
  }
  RankContext& ctx_;
  GuardedBuffer& a_;
  GuardedBuffer& b_;
  std::vector<uint8_t> beforeA_, beforeB_;
  std::vector<std::string> failures_;
  std::string failures_text_;
  int checked_ = 0;
};

// A correct allreduce on comm: the communicator is still usable.
std::string stillUsable(RankContext& ctx, const std::string& after) {
  ctx.note("usable after " + after);
  Case c;
  c.coll = Coll::AllReduce;
  c.dtype = loomFloat32;
  c.op = Op::Sum;
  c.count = 1000;
  c.seed = mix64(after.size());
  CaseResult r = runCase(ctx, c);
  if (r.fatal) {
    loomCommAbort(ctx.comm);
    ctx.comm = nullptr;
  }
  return r.failure.empty() ? "" : "communicator not usable after " + after + ": " + r.failure;
}

std::string badArgumentsBody(RankContext& ctx) {
  loomComm_t comm = ctx.comm;
  const int n = ctx.nranks, me = ctx.rank;
  const size_t count = 64;
  GuardedBuffer a(count * 8 * n, 1), b(count * 8 * n, 2);
  uint8_t* A = a.data();
  uint8_t* B = b.data();
  BadCallChecker check(ctx, a, b);
  const auto i32 = loomInt32;
  const auto badType = static_cast<loomDataType_t>(99);

  // Null communicator: every call; the message is this thread's (loomGetLastError(NULL)).
  loomComm_t nc = nullptr;
  check.expectInvalid("AllReduce comm=NULL", [&] { return loomAllReduce(A, B, count, i32, loomSum, nc, nullptr); }, nullptr);
  check.expectInvalid("Broadcast comm=NULL", [&] { return loomBroadcast(A, B, count, i32, 0, nc, nullptr); }, nullptr);
  check.expectInvalid("Reduce comm=NULL", [&] { return loomReduce(A, B, count, i32, loomSum, 0, nc, nullptr); }, nullptr);
  check.expectInvalid("AllGather comm=NULL", [&] { return loomAllGather(A, B, count, i32, nc, nullptr); }, nullptr);
  check.expectInvalid("ReduceScatter comm=NULL", [&] { return loomReduceScatter(A, B, count, i32, loomSum, nc, nullptr); }, nullptr);
  check.expectInvalid("AlltoAll comm=NULL", [&] { return loomAlltoAll(A, B, count, i32, nc, nullptr); }, nullptr);
  check.expectInvalid("Gather comm=NULL", [&] { return loomGather(A, B, count, i32, 0, nc, nullptr); }, nullptr);
  check.expectInvalid("Scatter comm=NULL", [&] { return loomScatter(A, B, count, i32, 0, nc, nullptr); }, nullptr);
  check.expectInvalid("Send comm=NULL", [&] { return loomSend(A, count, i32, 0, nc, nullptr); }, nullptr);
  check.expectInvalid("Recv comm=NULL", [&] { return loomRecv(B, count, i32, 0, nc, nullptr); }, nullptr);
  std::string f = stillUsable(ctx, "null-communicator calls");
  if (!f.empty()) return check.result() + "\n" + f;

  // Null buffers with count > 0. Rooted calls use this rank as root, so every buffer is significant.
  check.expectInvalid("AllReduce sendbuff=NULL", [&] { return loomAllReduce(nullptr, B, count, i32, loomSum, comm, nullptr); }, comm);
  check.expectInvalid("AllReduce recvbuff=NULL", [&] { return loomAllReduce(A, nullptr, count, i32, loomSum, comm, nullptr); }, comm);
  check.expectInvalid("Broadcast (root) sendbuff=NULL", [&] { return loomBroadcast(nullptr, B, count, i32, me, comm, nullptr); }, comm);
  check.expectInvalid("Broadcast recvbuff=NULL", [&] { return loomBroadcast(A, nullptr, count, i32, me, comm, nullptr); }, comm);
  check.expectInvalid("Reduce sendbuff=NULL", [&] { return loomReduce(nullptr, B, count, i32, loomSum, me, comm, nullptr); }, comm);
  check.expectInvalid("Reduce (root) recvbuff=NULL", [&] { return loomReduce(A, nullptr, count, i32, loomSum, me, comm, nullptr); }, comm);
  check.expectInvalid("AllGather sendbuff=NULL", [&] { return loomAllGather(nullptr, B, count, i32, comm, nullptr); }, comm);
  check.expectInvalid("AllGather recvbuff=NULL", [&] { return loomAllGather(A, nullptr, count, i32, comm, nullptr); }, comm);
  check.expectInvalid("ReduceScatter sendbuff=NULL", [&] { return loomReduceScatter(nullptr, B, count, i32, loomSum, comm, nullptr); }, comm);
  check.expectInvalid("ReduceScatter recvbuff=NULL", [&] { return loomReduceScatter(A, nullptr, count, i32, loomSum, comm, nullptr); }, comm);
  check.expectInvalid("AlltoAll sendbuff=NULL", [&] { return loomAlltoAll(nullptr, B, count, i32, comm, nullptr); }, comm);
  check.expectInvalid("AlltoAll recvbuff=NULL", [&] { return loomAlltoAll(A, nullptr, count, i32, comm, nullptr); }, comm);
  check.expectInvalid("Gather sendbuff=NULL", [&] { return loomGather(nullptr, B, count, i32, me, comm, nullptr); }, comm);
  check.expectInvalid("Gather (root) recvbuff=NULL", [&] { return loomGather(A, nullptr, count, i32, me, comm, nullptr); }, comm);
  check.expectInvalid("Scatter (root) sendbuff=NULL", [&] { return loomScatter(nullptr, B, count, i32, me, comm, nullptr); }, comm);
  check.expectInvalid("Scatter recvbuff=NULL", [&] { return loomScatter(A, nullptr, count, i32, me, comm, nullptr); }, comm);
  check.expectInvalid("Send buff=NULL", [&] { return loomSend(nullptr, count, i32, (me + 1) % n, comm, nullptr); }, comm);
  check.expectInvalid("Recv buff=NULL", [&] { return loomRecv(nullptr, count, i32, (me + 1) % n, comm, nullptr); }, comm);
  f = stillUsable(ctx, "null-buffer calls");
  if (!f.empty()) return check.result() + "\n" + f;

  // Unknown dtype and op.
  check.expectInvalid("AllReduce dtype=99", [&] { return loomAllReduce(A, B, count, badType, loomSum, comm, nullptr); }, comm);
  check.expectInvalid("Broadcast dtype=99", [&] { return loomBroadcast(A, B, count, badType, 0, comm, nullptr); }, comm);
  check.expectInvalid("Reduce dtype=99", [&] { return loomReduce(A, B, count, badType, loomSum, 0, comm, nullptr); }, comm);
  check.expectInvalid("AllGather dtype=99", [&] { return loomAllGather(A, B, count, badType, comm, nullptr); }, comm);
  check.expectInvalid("ReduceScatter dtype=99", [&] { return loomReduceScatter(A, B, count, badType, loomSum, comm, nullptr); }, comm);
  check.expectInvalid("AlltoAll dtype=99", [&] { return loomAlltoAll(A, B, count, badType, comm, nullptr); }, comm);
  check.expectInvalid("Gather dtype=99", [&] { return loomGather(A, B, count, badType, 0, comm, nullptr); }, comm);
  check.expectInvalid("Scatter dtype=99", [&] { return loomScatter(A, B, count, badType, 0, comm, nullptr); }, comm);
  check.expectInvalid("Send dtype=99", [&] { return loomSend(A, count, badType, (me + 1) % n, comm, nullptr); }, comm);
  check.expectInvalid("Recv dtype=99", [&] { return loomRecv(B, count, badType, (me + 1) % n, comm, nullptr); }, comm);
  check.expectInvalid("AllReduce dtype=-1", [&] { return loomAllReduce(A, B, count, static_cast<loomDataType_t>(-1), loomSum, comm, nullptr); }, comm);
  for (int badOp : {99, -1}) {
    auto op = static_cast<loomRedOp_t>(badOp);
    std::string s = " op=" + std::to_string(badOp);
    check.expectInvalid("AllReduce" + s, [&] { return loomAllReduce(A, B, count, i32, op, comm, nullptr); }, comm);
    check.expectInvalid("Reduce" + s, [&] { return loomReduce(A, B, count, i32, op, 0, comm, nullptr); }, comm);
    check.expectInvalid("ReduceScatter" + s, [&] { return loomReduceScatter(A, B, count, i32, op, comm, nullptr); }, comm);
  }
  f = stillUsable(ctx, "unknown dtype/op calls");
  if (!f.empty()) return check.result() + "\n" + f;

  // Roots and peers out of range.
  for (int root : {-1, n}) {
    std::string s = " root=" + std::to_string(root);
    check.expectInvalid("Broadcast" + s, [&] { return loomBroadcast(A, B, count, i32, root, comm, nullptr); }, comm);
    check.expectInvalid("Reduce" + s, [&] { return loomReduce(A, B, count, i32, loomSum, root, comm, nullptr); }, comm);
    check.expectInvalid("Gather" + s, [&] { return loomGather(A, B, count, i32, root, comm, nullptr); }, comm);
    check.expectInvalid("Scatter" + s, [&] { return loomScatter(A, B, count, i32, root, comm, nullptr); }, comm);
  }
  for (int peer : {-1, n, n + 100}) {
    std::string s = " peer=" + std::to_string(peer);
    check.expectInvalid("Send" + s, [&] { return loomSend(A, count, i32, peer, comm, nullptr); }, comm);
    check.expectInvalid("Recv" + s, [&] { return loomRecv(B, count, i32, peer, comm, nullptr); }, comm);
  }
  f = stillUsable(ctx, "root/peer out of range calls");
  if (!f.empty()) return check.result() + "\n" + f;

  // Counts whose byte size overflows size_t: count * sizeof(int32) wraps.
  const size_t huge = SIZE_MAX / 2;
  check.expectInvalid("AllReduce count=SIZE_MAX/2 int32", [&] { return loomAllReduce(A, B, huge, i32, loomSum, comm, nullptr); }, comm);
  check.expectInvalid("Broadcast count=SIZE_MAX/2 int32", [&] { return loomBroadcast(A, B, huge, i32, 0, comm, nullptr); }, comm);
  check.expectInvalid("Reduce count=SIZE_MAX/2 int32", [&] { return loomReduce(A, B, huge, i32, loomSum, 0, comm, nullptr); }, comm);
  check.expectInvalid("AllGather count=SIZE_MAX/2 int32", [&] { return loomAllGather(A, B, huge, i32, comm, nullptr); }, comm);
  check.expectInvalid("ReduceScatter count=SIZE_MAX/2 int32", [&] { return loomReduceScatter(A, B, huge, i32, loomSum, comm, nullptr); }, comm);
  check.expectInvalid("AlltoAll count=SIZE_MAX/2 int32", [&] { return loomAlltoAll(A, B, huge, i32, comm, nullptr); }, comm);
  check.expectInvalid("Gather count=SIZE_MAX/2 int32", [&] { return loomGather(A, B, huge, i32, 0, comm, nullptr); }, comm);
  check.expectInvalid("Scatter count=SIZE_MAX/2 int32", [&] { return loomScatter(A, B, huge, i32, 0, comm, nullptr); }, comm);
  check.expectInvalid("Send count=SIZE_MAX/2 int32", [&] { return loomSend(A, huge, i32, (me + 1) % n, comm, nullptr); }, comm);
  check.expectInvalid("Recv count=SIZE_MAX/2 int32", [&] { return loomRecv(B, huge, i32, (me + 1) % n, comm, nullptr); }, comm);
  check.expectInvalid("AllReduce count=SIZE_MAX float64", [&] { return loomAllReduce(A, B, SIZE_MAX, loomFloat64, loomSum, comm, nullptr); }, comm);
  if (n >= 2) {
    // One rank's bytes fit; the n-rank buffer's do not.
    const size_t perRank = SIZE_MAX / (4 * static_cast<size_t>(n)) + 1;
    std::string s = " count=SIZE_MAX/(4n)+1 int32 (n-rank buffer overflows)";
    check.expectInvalid("AllGather" + s, [&] { return loomAllGather(A, B, perRank, i32, comm, nullptr); }, comm);
    check.expectInvalid("ReduceScatter" + s, [&] { return loomReduceScatter(A, B, perRank, i32, loomSum, comm, nullptr); }, comm);
    check.expectInvalid("AlltoAll" + s, [&] { return loomAlltoAll(A, B, perRank, i32, comm, nullptr); }, comm);
    // Only the root holds the n-rank buffer, but every rank must refuse (root 0 for all): a non-root
    // that accepted would wait for an operation the root never starts.
    check.expectInvalid("Gather (root 0)" + s, [&] { return loomGather(A, B, perRank, i32, 0, comm, nullptr); }, comm);
    check.expectInvalid("Scatter (root 0)" + s, [&] { return loomScatter(A, B, perRank, i32, 0, comm, nullptr); }, comm);
  }
  f = stillUsable(ctx, "overflowing-count calls");
  return check.result() + (f.empty() ? "" : "\n" + f);
}

class Errors : public ::testing::TestWithParam<RanksParam> {};

TEST_P(Errors, BadArgumentsAreRejectedAndCommStaysUsable) {
  RunOptions options;
  options.transport = GetParam().transport;
  options.timeoutSec = 120;
  std::string failures = runRanks(testLaunch(), GetParam().nranks, options, badArgumentsBody);
  EXPECT_TRUE(failures.empty()) << failures;
}

// The issue says null buffers are invalid with count > 0; with count 0 the calls are valid no-ops.
TEST_P(Errors, NullBuffersWithCountZeroAreAccepted) {
  RunOptions options;
  options.transport = GetParam().transport;
  options.timeoutSec = 120;
  std::string failures = runRanks(testLaunch(), GetParam().nranks, options, [](RankContext& ctx) -> std::string {
    loomComm_t comm = ctx.comm;
    const int n = ctx.nranks, me = ctx.rank;
    LT_CALL(comm, loomAllReduce(nullptr, nullptr, 0, loomFloat32, loomSum, comm, nullptr));
    LT_CALL(comm, loomBroadcast(nullptr, nullptr, 0, loomFloat32, n - 1, comm, nullptr));
    LT_CALL(comm, loomReduce(nullptr, nullptr, 0, loomFloat32, loomMax, 0, comm, nullptr));
    LT_CALL(comm, loomAllGather(nullptr, nullptr, 0, loomFloat32, comm, nullptr));
    LT_CALL(comm, loomReduceScatter(nullptr, nullptr, 0, loomFloat32, loomSum, comm, nullptr));
    LT_CALL(comm, loomAlltoAll(nullptr, nullptr, 0, loomFloat32, comm, nullptr));
    LT_CALL(comm, loomGather(nullptr, nullptr, 0, loomFloat32, 0, comm, nullptr));
    LT_CALL(comm, loomScatter(nullptr, nullptr, 0, loomFloat32, 0, comm, nullptr));
    LT_CALL(comm, loomGroupStart());
    loomResult_t s = loomSend(nullptr, 0, loomFloat32, (me + 1) % n, comm, nullptr);
    loomResult_t r = loomRecv(nullptr, 0, loomFloat32, (me + n - 1) % n, comm, nullptr);
    loomResult_t e = loomGroupEnd();
    LT_CALL(comm, s);
    LT_CALL(comm, r);
    LT_CALL(comm, e);
    return stillUsable(ctx, "count-0 calls with null buffers");
  });
  EXPECT_TRUE(failures.empty()) << failures;
}

INSTANTIATE_TEST_SUITE_P(Ranks, Errors, ::testing::ValuesIn(ranksParams()), ranksParamName);

}  // namespace
}  // namespace loomtest
