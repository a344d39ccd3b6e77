// count = 4M+3 (4194307: not a multiple of any chunk size or rank count) for a subset of
// (collective, dtype, op): float32 sum and int8, on threads, processes and sockets.
#include "matrix_test.h"

namespace loomtest {
namespace {

Case large(Coll coll, loomDataType_t dtype, Op op, bool inPlace, int root = 0) {
  Case c;
  c.coll = coll;
  c.dtype = dtype;
  c.op = op;
  c.count = kLargeCount;
  c.inPlace = inPlace;
  c.root = root;
  c.seed = mix64(static_cast<uint64_t>(coll) * 131 + dtype * 7 + static_cast<int>(op) + (inPlace ? 1000 : 0));
  return c;
}

void expectCasesPass(Launch launch, const char* transport, int nranks, const std::vector<Case>& cases) {
  RunOptions options;
  options.transport = transport;
  options.timeoutSec = 600;
  std::string failures = runRanks(launch, nranks, options, [&](RankContext& ctx) { return runCases(ctx, cases); });
  EXPECT_TRUE(failures.empty()) << nranks << " " << launchName(launch) << " ranks, LOOM_TRANSPORT="
                                << (*transport ? transport : "(unset)") << ":\n"
                                << failures;
}

TEST(Large, ThreadsEveryCollective) {
  expectCasesPass(Launch::Threads, "", 3,
                  {large(Coll::AllReduce, loomFloat32, Op::Sum, false),
                   large(Coll::AllReduce, loomFloat32, Op::Sum, true),
                   large(Coll::AllReduce, loomInt8, Op::Sum, false),
                   large(Coll::AllReduce, loomInt8, Op::Max, true),
                   large(Coll::ReduceScatter, loomFloat32, Op::Sum, false),
                   large(Coll::ReduceScatter, loomInt8, Op::Sum, true),
                   large(Coll::Reduce, loomFloat32, Op::Sum, false, 1),
                   large(Coll::Reduce, loomInt8, Op::Min, true, 2),
                   large(Coll::Broadcast, loomFloat32, Op::Sum, false, 2),
                   large(Coll::Broadcast, loomInt8, Op::Sum, true, 0),
                   large(Coll::AllGather, loomFloat32, Op::Sum, true),
                   large(Coll::AllGather, loomInt8, Op::Sum, false),
                   large(Coll::AlltoAll, loomInt8, Op::Sum, false),
                   large(Coll::Gather, loomInt8, Op::Sum, false, 1),
                   large(Coll::Scatter, loomInt8, Op::Sum, true, 2),
                   large(Coll::SendRecv, loomFloat32, Op::Sum, false)});
}

TEST(Large, ProcessesFive) {
  expectCasesPass(Launch::Processes, "", 5,
                  {large(Coll::AllReduce, loomFloat32, Op::Sum, false),
                   large(Coll::AllReduce, loomInt8, Op::Sum, true),
                   large(Coll::ReduceScatter, loomInt8, Op::Sum, false),
                   large(Coll::AllGather, loomInt8, Op::Sum, true),
                   large(Coll::Broadcast, loomFloat32, Op::Sum, false, 4),
                   large(Coll::AlltoAll, loomInt8, Op::Sum, false)});
}

TEST(Large, SocketThreads) {
  expectCasesPass(Launch::Threads, "socket", 2,
                  {large(Coll::AllReduce, loomFloat32, Op::Sum, false),
                   large(Coll::AllReduce, loomInt8, Op::Sum, true),
                   large(Coll::AllGather, loomInt8, Op::Sum, false)});
}

TEST(Large, SocketProcesses) {
  expectCasesPass(Launch::Processes, "socket", 3,
                  {large(Coll::AllReduce, loomFloat32, Op::Sum, true),
                   large(Coll::ReduceScatter, loomFloat32, Op::Sum, false)});
}

TEST(Large, ShmThreads) {
  expectCasesPass(Launch::Threads, "shm", 4, {large(Coll::AllReduce, loomFloat32, Op::Sum, false)});
}

}  // namespace
}  // namespace loomtest
