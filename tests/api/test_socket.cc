// LOOM_TRANSPORT=socket (TCP between every pair): thread ranks 1..8 and process ranks 1..5, with
// the lighter matrix (every collective, dtype, op, count and in-place mode; pairs rotate).
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

std::vector<SocketParam> params(Launch launch, int maxRanks) {
  std::vector<SocketParam> v;
  for (int n = 1; n <= maxRanks; ++n) v.push_back({launch, n});
  return v;
}

std::string paramName(const ::testing::TestParamInfo<SocketParam>& info) {
  std::string name = "n";
  name += std::to_string(info.param.nranks);
  return name;
}

#ifdef LOOM_API_SOCKET_PROCESSES
INSTANTIATE_TEST_SUITE_P(Processes, Socket, ::testing::ValuesIn(params(Launch::Processes, 5)), paramName);
#else
INSTANTIATE_TEST_SUITE_P(Threads, Socket, ::testing::ValuesIn(params(Launch::Threads, 8)), paramName);
#endif

}  // namespace
}  // namespace loomtest
