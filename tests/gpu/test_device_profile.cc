// The plan kernels' profile (LOOM_DEVICE_PROFILE, loomCommDeviceProfile): two rank threads sharing one
// GPU run all-reduces as plan kernels; with the setting on, each rank's finished launches report their
// lanes, the steps they ran and the bytes those moved, and where each lane's first thread spent its time
// (waiting, data, publishing: the parts add up to the lanes' time); a reset read leaves nothing to read
// again. With the setting off the call says so and names it. On FakeCuda (the kernels' host emulation,
// the host's clock) and on a GPU (%globaltimer).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "../api/harness.h"
#include "device_cases.h"
#include "gpu_support.h"

namespace loomgpu {
namespace {

constexpr int kProfileRanks = 2;
constexpr size_t kProfileCount = 256 * 1024;  // 1 MiB of floats: several steps per lane
constexpr int kProfileCalls = 3;

std::string allReduces(loomtest::RankContext& ctx, cudaStream_t stream, DeviceBuffer& send, DeviceBuffer& recv) {
  std::vector<float> input(kProfileCount);
  for (size_t i = 0; i < kProfileCount; ++i) input[i] = static_cast<float>((i * 3 + ctx.rank) % 101);
  send.upload(input.data(), kProfileCount * sizeof(float));
  if (std::string met = meetOnTheHost(ctx); !met.empty()) return met;
  for (int c = 0; c < kProfileCalls; ++c)
    if (loomAllReduce(send.data(), recv.data(), kProfileCount, loomFloat32, loomSum, ctx.comm, stream) != loomSuccess)
      return " all-reduce: " + std::string(loomGetLastError(ctx.comm)) + ";";
  cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  const std::vector<uint8_t> out = recv.download();
  const float* got = reinterpret_cast<const float*>(out.data());
  for (size_t i = 0; i < kProfileCount; ++i) {
    const float want = static_cast<float>((i * 3) % 101 + (i * 3 + 1) % 101);
    if (got[i] != want) return " element " + std::to_string(i) + " is " + std::to_string(got[i]) + ";";
  }
  return "";
}

std::string checkProfile(loomtest::RankContext& ctx, cudaStream_t stream, bool profiled) {
  DeviceBuffer send(kProfileCount * sizeof(float), 3), recv(kProfileCount * sizeof(float), 5);
  std::string problems = allReduces(ctx, stream, send, recv);
  loomDeviceProfile_t p = {};
  const loomResult_t read = loomCommDeviceProfile(ctx.comm, &p, 1);
  if (!profiled) {
    const std::string why = loomGetLastError(ctx.comm);
    if (read != loomInvalidUsage || why.find("LOOM_DEVICE_PROFILE") == std::string::npos)
      problems += " not profiled, the read gives " + std::to_string(read) + " (" + why + ");";
  } else if (read != loomSuccess) {
    problems += " the read failed: " + std::string(loomGetLastError(ctx.comm)) + ";";
  } else {
    if (p.launches != kProfileCalls) problems += " " + std::to_string(p.launches) + " launches counted;";
    if (p.lanes < kProfileCalls) problems += " " + std::to_string(p.lanes) + " lanes;";
    if (p.steps < p.lanes) problems += " " + std::to_string(p.steps) + " steps;";
    // Each rank's steps carry at least its share of the input per call: a ring all-reduce over 2 ranks
    // its half twice out (reduce-scatter and all-gather), a peer-memory two-shot its half once (one
    // step reduces block r of both inputs into both outputs).
    if (p.bytes < kProfileCalls * kProfileCount * sizeof(float) / kProfileRanks)
      problems += " " + std::to_string(p.bytes) + " bytes;";
    if (p.dataNs == 0) problems += " no time in data;";
    if (p.waitNs + p.dataNs + p.publishNs != p.laneNs)
      problems += " the parts (" + std::to_string(p.waitNs + p.dataNs + p.publishNs) + " ns) are not the lanes' " +
                  std::to_string(p.laneNs) + " ns;";
    loomDeviceProfile_t again = {};
    if (loomCommDeviceProfile(ctx.comm, &again, 0) != loomSuccess || again.launches != 0)
      problems += " after a reset read " + std::to_string(again.launches) + " launches are left;";
  }
  if (loomCommDeviceProfile(ctx.comm, nullptr, 0) != loomInvalidArgument) problems += " a NULL profile is accepted;";
  problems += send.checkGuards("send") + recv.checkGuards("recv");
  if (std::string met = meetOnTheHost(ctx); !met.empty()) problems += met;  // before the buffers go
  return problems;
}

TEST(DeviceProfile, ProfiledLaunchesReportTheirLanesStepsAndTime) {
  LOOM_REQUIRE_GPU();
  setenv("LOOM_DEVICE_PROFILE", "1", 1);
  loomtest::RunOptions run;
  run.timeoutSec = 120;
  EXPECT_EQ(loomtest::runRanks(loomtest::Launch::Threads, kProfileRanks, run,
                               [](loomtest::RankContext& ctx) {
                                 return withStreamOnGpu0(ctx, [](loomtest::RankContext& c, cudaStream_t s) { return checkProfile(c, s, true); });
                               }),
            "");
  unsetenv("LOOM_DEVICE_PROFILE");
}

TEST(DeviceProfile, OffByDefaultTheReadSaysHowToTurnItOn) {
  LOOM_REQUIRE_GPU();
  unsetenv("LOOM_DEVICE_PROFILE");
  loomtest::RunOptions run;
  run.timeoutSec = 120;
  EXPECT_EQ(loomtest::runRanks(loomtest::Launch::Threads, kProfileRanks, run,
                               [](loomtest::RankContext& ctx) {
                                 return withStreamOnGpu0(ctx, [](loomtest::RankContext& c, cudaStream_t s) { return checkProfile(c, s, false); });
                               }),
            "");
}

}  // namespace
}  // namespace loomgpu
