// Going on without a lost rank on device memory: four thread ranks on GPU 0 allreduce device buffers,
// rank 3 leaves (aborts its communicator), the others shrink without it (revoking first) and allreduce
// device buffers on the smaller communicator, checked element by element; with and without plan
// kernels (LOOM_DEVICE_PLANS). Runs on FakeCuda everywhere (fakecuda_shrink) and on a GPU where lent.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "../api/harness.h"
#include "device_cases.h"
#include "gpu_support.h"
#include "loom.h"

namespace loomgpu {
namespace {

constexpr size_t kElements = 100003;  // floats: not a multiple of anything the library cuts by

// Allreduces the device buffer (rank r contributes (r + 1) * (i % 5 + 1)) over comm on stream and
// checks every element; "" when right.
std::string checkedDeviceAllReduce(loomComm_t comm, DeviceBuffer& buf, cudaStream_t stream) {
  int rank = -1, n = 0;
  loomCommUserRank(comm, &rank);
  loomCommCount(comm, &n);
  std::vector<float> host(kElements);
  for (size_t i = 0; i < kElements; ++i) host[i] = static_cast<float>((rank + 1) * (i % 5 + 1));
  buf.upload(host.data(), kElements * sizeof(float));
  float* data = reinterpret_cast<float*>(buf.data());
  if (loomAllReduce(data, data, kElements, loomFloat32, loomSum, comm, stream) != loomSuccess)
    return std::string("allreduce: ") + loomGetLastError(comm);
  cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  const std::vector<uint8_t> out = buf.download();
  std::memcpy(host.data(), out.data(), kElements * sizeof(float));
  for (size_t i = 0; i < kElements; ++i)
    if (host[i] != static_cast<float>(n * (n + 1) / 2 * (i % 5 + 1)))
      return "element " + std::to_string(i) + " is " + std::to_string(host[i]) + " on " + std::to_string(n) + " ranks";
  return buf.checkGuards("allreduce buffer");
}

void shrinkOnDevice() {
  loomtest::RunOptions run;
  run.timeoutSec = 300;
  const std::string failures =
      loomtest::runRanks(loomtest::Launch::Threads, 4, run, [&](loomtest::RankContext& ctx) -> std::string {
        cudaCheck(cudaSetDevice(0), "cudaSetDevice");
        cudaStream_t stream = nullptr;
        cudaCheck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
        DeviceBuffer buf(kElements * sizeof(float), 7 + ctx.rank);
        std::string problem = meetOnTheHost(ctx);
        if (problem.empty()) problem = checkedDeviceAllReduce(ctx.comm, buf, stream);
        if (problem.empty() && ctx.rank == 3) {
          loomCommAbort(ctx.comm);  // leaves: the others shrink without it
          ctx.comm = nullptr;
        } else if (problem.empty()) {
          int lost[] = {3};
          loomComm_t smaller = nullptr;
          if (loomCommShrink(ctx.comm, lost, 1, &smaller, nullptr, LOOM_SHRINK_ABORT) != loomSuccess) {
            problem = std::string("loomCommShrink: ") + loomGetLastError(ctx.comm);
          } else {
            problem = checkedDeviceAllReduce(smaller, buf, stream);
            if (problem.empty()) problem = checkedDeviceAllReduce(smaller, buf, stream);  // and again
            loomCommDestroy(smaller);
          }
        }
        cudaStreamDestroy(stream);
        return problem;
      });
  EXPECT_EQ(failures, "");
}

class DeviceShrink : public ::testing::Test {
 protected:
  void SetUp() override { LOOM_REQUIRE_GPU(); }
};

TEST_F(DeviceShrink, StagedThroughTheHost) {
  loomtest::ScopedEnv plans("LOOM_DEVICE_PLANS", "0");
  shrinkOnDevice();
}

TEST_F(DeviceShrink, PlanKernels) {
  loomtest::ScopedEnv plans("LOOM_DEVICE_PLANS", "require");
  shrinkOnDevice();
}

}  // namespace
}  // namespace loomgpu
