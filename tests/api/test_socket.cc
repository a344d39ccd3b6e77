// LOOM_TRANSPORT=socket (TCP between every pair): thread ranks 1..8 and process ranks 1..5 (the counts
// of launch_config.h), with
// the lighter matrix (every collective, dtype, op, count and in-place mode; pairs rotate).
#include "launch_config.h"
#include "matrix_test.h"

namespace loomtest {
namespace {

struct SocketParam {
  Launch launch;
  int nranks;
};

class Socket : public ::testing::TestWithParam<SocketParam> {
 protected:
  void run(MatrixSpec spec) { expectMatrixPasses(GetParam().launch, "socket", GetParam().nranks, spec); }
};

TEST_P(Socket, Reductions) {
  run({.colls = {Coll::AllReduce, Coll::ReduceScatter, Coll::Reduce}, .crossDtypeOp = false});
}
TEST_P(Socket, DataMovement) {
  run({.colls = {Coll::Broadcast, Coll::AllGather, Coll::AlltoAll, Coll::Gather, Coll::Scatter,
                 Coll::SendRecv}});
}
TEST_P(Socket, EveryRoot) {
  run({.colls = {Coll::Reduce, Coll::Broadcast, Coll::Gather, Coll::Scatter},
       .dtypes = {loomFloat64, loomInt32},
       .ops = {Op::Sum, Op::Max},
       .counts = {3, 65537},
       .crossDtypeOp = false,
       .everyRoot = true});
}

std::vector<SocketParam> socketParams(Launch launch) {
  std::vector<SocketParam> v;
  for (int n : rankCounts(maxRanks(launch))) v.push_back({launch, n});
  return v;
}

std::string socketParamName(const ::testing::TestParamInfo<SocketParam>& info) {
  std::string name = "n";
  name += std::to_string(info.param.nranks);
  return name;
}

// Both launches in one binary; each meson test runs one of them (tests/api/meson.build).
INSTANTIATE_TEST_SUITE_P(Processes, Socket, ::testing::ValuesIn(socketParams(Launch::Processes)), socketParamName);
INSTANTIATE_TEST_SUITE_P(Threads, Socket, ::testing::ValuesIn(socketParams(Launch::Threads)), socketParamName);

}  // namespace
}  // namespace loomtest
