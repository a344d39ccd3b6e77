// The steady-state launch path of plan kernels (src/device/plan_kernels.h): once a shape was launched,
// 200 more launches of it enqueued without waiting for the stream allocate nothing, synchronize
// nothing and copy nothing host-to-device (no plan upload) — FakeCuda counts the calls
// (tests/fakecuda/fake_counters.h). A rank that allocated or synchronized the device between a peer's
// launch and its own could deadlock ranks sharing the GPU; an upload per call is latency. FakeCuda
// only: the counts are the test double's. Every collective, 2 rank threads, plan kernels required;
// the results of the last launch are checked too.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../api/harness.h"
#include "../fakecuda/fake_counters.h"
#include "device_cases.h"
#include "gpu_support.h"

namespace loomgpu {
namespace {

constexpr int kRanks = 2;
constexpr int kLaunches = 200;
constexpr size_t kCount = 4099;  // elements per rank block: an awkward count

struct Shape {
  const char* name;
  // One launch of the collective on this rank's buffers (send holds kRanks * kCount floats of
  // rank+1, recv as many).
  loomResult_t (*call)(float* send, float* recv, loomComm_t comm, int rank, cudaStream_t stream);
  // The value every element of recv's first `count` holds after it, and that count.
  float (*want)(int rank);
  size_t (*outputCount)();
};

float sumOfRanks(int) { return kRanks * (kRanks + 1) / 2.0f; }
float rootValue(int) { return 1.0f; }  // root 0's input, rank 0 + 1
size_t block() { return kCount; }
size_t blocks() { return kRanks * kCount; }

const Shape kShapes[] = {
    {"AllReduce", [](float* s, float* r, loomComm_t c, int, cudaStream_t st) {
       return loomAllReduce(s, r, kCount, loomFloat32, loomSum, c, st); }, sumOfRanks, block},
    {"ReduceScatter", [](float* s, float* r, loomComm_t c, int, cudaStream_t st) {
       return loomReduceScatter(s, r, kCount, loomFloat32, loomSum, c, st); }, sumOfRanks, block},
    {"Reduce", [](float* s, float* r, loomComm_t c, int, cudaStream_t st) {
       return loomReduce(s, r, kCount, loomFloat32, loomSum, 0, c, st); },
     [](int rank) { return rank == 0 ? sumOfRanks(0) : -1.0f; }, block},
    {"Broadcast", [](float* s, float* r, loomComm_t c, int, cudaStream_t st) {
       return loomBroadcast(s, r, kCount, loomFloat32, 0, c, st); }, rootValue, block},
    {"AllGather", [](float* s, float* r, loomComm_t c, int, cudaStream_t st) {
       return loomAllGather(s, r, kCount, loomFloat32, c, st); }, nullptr, blocks},
    {"AlltoAll", [](float* s, float* r, loomComm_t c, int, cudaStream_t st) {
       return loomAlltoAll(s, r, kCount, loomFloat32, c, st); }, nullptr, blocks},
    {"Gather", [](float* s, float* r, loomComm_t c, int, cudaStream_t st) {
       return loomGather(s, r, kCount, loomFloat32, 0, c, st); }, nullptr, blocks},
    {"Scatter", [](float* s, float* r, loomComm_t c, int, cudaStream_t st) {
       return loomScatter(s, r, kCount, loomFloat32, 0, c, st); }, rootValue, block},
    // A lone send or receive (a pipeline stage's): rank 0 sends, rank 1 receives.
    {"SendRecv", [](float* s, float* r, loomComm_t c, int rank, cudaStream_t st) {
       return rank == 0 ? loomSend(s, kCount, loomFloat32, 1, c, st) : loomRecv(r, kCount, loomFloat32, 0, c, st); },
     [](int rank) { return rank == 1 ? 1.0f : -1.0f; }, block},
};

std::string describeCounts(const fakecuda::CallCounts& c) {
  return std::to_string(c.allocations) + " allocations, " + std::to_string(c.frees) + " frees, " +
         std::to_string(c.deviceSynchronizations) + " device synchronizations, " +
         std::to_string(c.hostToDeviceCopies) + " host-to-device copies";
}

class SteadyLaunches : public ::testing::TestWithParam<Shape> {};

TEST_P(SteadyLaunches, AllocateSynchronizeAndUploadNothingAfterWarmUp) {
  const Shape& shape = GetParam();
  loomtest::RunOptions run;
  run.timeoutSec = 300;
  const std::string failures = loomtest::runRanks(loomtest::Launch::Threads, kRanks, run,
                                                  [&](loomtest::RankContext& ctx) -> std::string {
    cudaCheck(cudaSetDevice(0), "cudaSetDevice");
    cudaStream_t stream = nullptr;
    cudaCheck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    const size_t n = kRanks * kCount;
    DeviceBuffer send(n * sizeof(float), 3), recv(n * sizeof(float), 5);
    std::vector<float> input(n, static_cast<float>(ctx.rank + 1));
    send.upload(input.data(), n * sizeof(float));
    std::vector<float> poison(n, -1.0f);
    recv.upload(poison.data(), n * sizeof(float));
    auto* s = reinterpret_cast<float*>(send.data());
    auto* r = reinterpret_cast<float*>(recv.data());
    if (std::string met = meetOnTheHost(ctx); !met.empty()) return met;
    // Warm-up: the shape's setup, encoding, workspace.
    for (int i = 0; i < 3; ++i)
      if (loomResult_t e = shape.call(s, r, ctx.comm, ctx.rank, stream); e != loomSuccess)
        return loomtest::callFailure((std::string(shape.name) + " (warm-up)").c_str(), e, ctx.comm);
    cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    if (std::string met = meetOnTheHost(ctx); !met.empty()) return met;
    if (ctx.rank == 0) fakecuda::resetCallCounts();
    if (std::string met = meetOnTheHost(ctx); !met.empty()) return met;
    for (int i = 0; i < kLaunches; ++i)
      if (loomResult_t e = shape.call(s, r, ctx.comm, ctx.rank, stream); e != loomSuccess)
        return loomtest::callFailure((std::string(shape.name) + " (launch " + std::to_string(i) + ")").c_str(), e, ctx.comm);
    // Every rank enqueued all of its launches; their kernels may still run (they call nothing).
    if (std::string met = meetOnTheHost(ctx); !met.empty()) return met;
    const fakecuda::CallCounts counts = fakecuda::callCounts();
    // The counts are the process's: every rank reads them before any goes on to the download below,
    // a synchronous copy that counts as a device synchronization (a fresh-clone CI run saw rank 0 count
    // rank 1's).
    if (std::string met = meetOnTheHost(ctx); !met.empty()) return met;
    std::string problems;
    if (counts.allocations || counts.frees || counts.deviceSynchronizations || counts.hostToDeviceCopies)
      problems += " " + std::to_string(kLaunches) + " launches of " + shape.name + " after warm-up made " +
                  describeCounts(counts) + ";";
    cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    loomResult_t async = loomSuccess;
    loomCommGetAsyncError(ctx.comm, &async);
    if (async != loomSuccess) problems += " async error: " + std::string(loomGetLastError(ctx.comm)) + ";";
    const std::vector<uint8_t> bytes = recv.download();
    const auto* out = reinterpret_cast<const float*>(bytes.data());
    for (size_t i = 0; i < shape.outputCount(); ++i) {
      // Gathers: block b holds rank b's input (b + 1); the rest: one value per rank.
      const float want = shape.want ? shape.want(ctx.rank) : static_cast<float>(i / kCount + 1);
      const bool gathered = std::string(shape.name) == "Gather" && ctx.rank != 0;
      if (!gathered && out[i] != want) {
        problems += " element " + std::to_string(i) + " is " + std::to_string(out[i]) + ", want " +
                    std::to_string(want) + ";";
        break;
      }
    }
    problems += send.checkGuards("send") + recv.checkGuards("recv");
    if (std::string met = meetOnTheHost(ctx); !met.empty()) problems += met;  // before the buffers go
    cudaStreamDestroy(stream);
    return problems;
  });
  EXPECT_EQ(failures, "");
}

INSTANTIATE_TEST_SUITE_P(Collectives, SteadyLaunches, ::testing::ValuesIn(kShapes),
                         [](const ::testing::TestParamInfo<Shape>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace loomgpu
