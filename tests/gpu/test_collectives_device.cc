// Every collective on CUDA device buffers, 2-4 ranks on ONE GPU (device 0), checked element by
// element (device_cases.h). Compiled twice: ranks as threads of this process, and with
// LOOM_GPU_PROCESSES as forked processes (this process never initializes CUDA before forking: the
// GPU probe runs in a child). Skips with the reason when no GPU is present.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../api/harness.h"
#include "device_cases.h"
#include "gpu_support.h"

namespace loomgpu {
namespace {

using loomtest::Coll;
using loomtest::Launch;
using loomtest::MatrixSpec;
using loomtest::Op;

#ifdef LOOM_GPU_PROCESSES
constexpr Launch kLaunch = Launch::Processes;
#else
constexpr Launch kLaunch = Launch::Threads;
#endif

void expectPasses(int nranks, const std::vector<MatrixSpec>& specs, const DeviceRunOptions& options = {}) {
  loomtest::RunOptions run;
  run.timeoutSec = 600;
  std::string failures = loomtest::runRanks(kLaunch, nranks, run, [&](loomtest::RankContext& ctx) -> std::string {
    std::vector<loomtest::Case> cases;
    for (const MatrixSpec& spec : specs) {
      std::vector<loomtest::Case> more = loomtest::buildCases(spec, nranks);
      cases.insert(cases.end(), more.begin(), more.end());
    }
    return runDeviceCases(ctx, cases, 0, options);
  });
  EXPECT_EQ(failures, "");
}

// Reductions: every dtype and every op at each count (rotated pairings), plus the full cross product
// at one mid-size count; data movement for every dtype.
std::vector<MatrixSpec> reductionSpecs(Coll coll) {
  MatrixSpec rotated{.colls = {coll}, .crossDtypeOp = false};
  MatrixSpec full{.colls = {coll}, .counts = {1000}, .inPlace = {false}};
  return {rotated, full};
}

class DeviceCollectives : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { LOOM_REQUIRE_GPU(); }
};

TEST_P(DeviceCollectives, AllReduce) { expectPasses(GetParam(), reductionSpecs(Coll::AllReduce)); }
TEST_P(DeviceCollectives, ReduceScatter) { expectPasses(GetParam(), reductionSpecs(Coll::ReduceScatter)); }
TEST_P(DeviceCollectives, Reduce) { expectPasses(GetParam(), reductionSpecs(Coll::Reduce)); }
TEST_P(DeviceCollectives, Broadcast) { expectPasses(GetParam(), {{.colls = {Coll::Broadcast}}}); }
TEST_P(DeviceCollectives, AllGather) { expectPasses(GetParam(), {{.colls = {Coll::AllGather}}}); }
TEST_P(DeviceCollectives, AlltoAll) { expectPasses(GetParam(), {{.colls = {Coll::AlltoAll}}}); }
TEST_P(DeviceCollectives, Gather) { expectPasses(GetParam(), {{.colls = {Coll::Gather}}}); }
TEST_P(DeviceCollectives, Scatter) { expectPasses(GetParam(), {{.colls = {Coll::Scatter}}}); }
TEST_P(DeviceCollectives, SendRecvRing) { expectPasses(GetParam(), {{.colls = {Coll::SendRecv}}}); }

// The legacy default stream (stream NULL) instead of a created stream.
TEST_P(DeviceCollectives, NullStream) {
  DeviceRunOptions options;
  options.useNullStream = true;
  expectPasses(GetParam(),
               {{.colls = {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter},
                 .dtypes = {loomFloat32, loomBfloat16},
                 .ops = {Op::Sum, Op::Avg},
                 .counts = {1, 65537}}},
               options);
}

// PreMulSum with its scalar in device memory (loomScalarDevice), read when the operation runs.
TEST_P(DeviceCollectives, DeviceResidentScalar) {
  DeviceRunOptions options;
  options.deviceScalars = true;
  expectPasses(GetParam(),
               {{.colls = {Coll::AllReduce, Coll::Reduce, Coll::ReduceScatter},
                 .ops = {Op::PreMulSum},
                 .counts = {3, 1000}}},
               options);
}

// 1 MiB+ elements: staging of large buffers (several pinned blocks, plan chunking).
TEST_P(DeviceCollectives, Large) {
  expectPasses(GetParam(), {{.colls = {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter},
                             .dtypes = {loomFloat32, loomFloat16},
                             .ops = {Op::Sum},
                             .counts = {(size_t{1} << 20) + 5}}});
}

INSTANTIATE_TEST_SUITE_P(Ranks, DeviceCollectives, ::testing::Values(2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) { return "n" + std::to_string(info.param); });

}  // namespace
}  // namespace loomgpu
