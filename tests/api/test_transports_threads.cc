// Thread ranks over the transports other than the default: LOOM_TRANSPORT=shm and socket between
// threads, and communicators made by loomCommInitAll. A lighter matrix than test_threads.cc: every
// collective, every dtype and every op at every standard count, in and out of place, with
// (dtype, op) pairs rotating instead of crossed.
#include "launch_config.h"
#include "matrix_test.h"

namespace loomtest {
namespace {

struct TransportParam {
  Launch launch;
  const char* transport;  // "" = default
  int nranks;
};

class TransportThreads : public ::testing::TestWithParam<TransportParam> {
 protected:
  void run(MatrixSpec spec) {
    const auto& p = GetParam();
    expectMatrixPasses(p.launch, p.transport, p.nranks, spec);
  }
};

TEST_P(TransportThreads, Reductions) {
  run({.colls = {Coll::AllReduce, Coll::ReduceScatter, Coll::Reduce}, .crossDtypeOp = false});
}
TEST_P(TransportThreads, DataMovement) {
  run({.colls = {Coll::Broadcast, Coll::AllGather, Coll::AlltoAll, Coll::Gather, Coll::Scatter,
                 Coll::SendRecv}});
}
TEST_P(TransportThreads, EveryRoot) {
  run({.colls = {Coll::Reduce, Coll::Broadcast, Coll::Gather, Coll::Scatter},
       .dtypes = {loomFloat32, loomUint8},
       .ops = {Op::Sum, Op::Prod},
       .counts = {1, 1000},
       .crossDtypeOp = false,
       .everyRoot = true});
}

std::vector<TransportParam> transportParams(Launch launch, const char* transport) {
  std::vector<TransportParam> v;
  for (int n : rankCounts(maxRanks(Launch::Threads))) v.push_back({launch, transport, n});
  return v;
}

std::string transportParamName(const ::testing::TestParamInfo<TransportParam>& info) {
  std::string name = "n";
  name += std::to_string(info.param.nranks);
  return name;
}

INSTANTIATE_TEST_SUITE_P(Shm, TransportThreads, ::testing::ValuesIn(transportParams(Launch::Threads, "shm")), transportParamName);
INSTANTIATE_TEST_SUITE_P(InitAll, TransportThreads, ::testing::ValuesIn(transportParams(Launch::ThreadsInitAll, "")),
                         transportParamName);

}  // namespace
}  // namespace loomtest
