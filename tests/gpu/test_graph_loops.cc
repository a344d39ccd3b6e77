// A CUDA graph of a whole loop, as a training step captures one: 100 collectives of four kinds
// (all-reduce, all-gather, reduce-scatter, broadcast from a root that moves) and awkward sizes, each
// with buffers of its own, captured on every rank's stream (rank threads sharing one GPU, plan
// kernels) after one eager pass of the loop, then the graph replayed with new inputs each time and
// every output checked element by element after the eager pass and every replay; an eager collective after the replays still runs and no asynchronous
// error is left. On FakeCuda (its graphs run their nodes in order on the launch's stream) and on a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "../api/harness.h"
#include "device_cases.h"
#include "gpu_support.h"

namespace loomgpu {
namespace {

constexpr int kLoopOps = 100;
constexpr int kReplays = 2;
constexpr size_t kCounts[] = {1, 7, 1000, 4099, 65539};

enum class Kind { AllReduce, AllGather, ReduceScatter, Broadcast };

struct LoopOp {
  Kind kind;
  size_t count;  // per rank: the output's (all-gather: the input's; reduce-scatter: the output's)
  int root;      // broadcast
  std::unique_ptr<DeviceBuffer> in, out;
};

// Small integers, so that every sum is exact in float whatever the order.
float inputValue(int op, int rank, size_t i, int replay) { return static_cast<float>((op * 7 + rank * 3 + i + replay) % 50); }

size_t inputCount(const LoopOp& op, int n) { return op.kind == Kind::ReduceScatter ? op.count * n : op.count; }
size_t outputCount(const LoopOp& op, int n) { return op.kind == Kind::AllGather ? op.count * n : op.count; }

float expected(const LoopOp& op, int index, int n, int rank, size_t i, int replay) {
  switch (op.kind) {
    case Kind::AllReduce: {
      float sum = 0;
      for (int r = 0; r < n; ++r) sum += inputValue(index, r, i, replay);
      return sum;
    }
    case Kind::AllGather: return inputValue(index, static_cast<int>(i / op.count), i % op.count, replay);
    case Kind::ReduceScatter: {
      float sum = 0;
      for (int r = 0; r < n; ++r) sum += inputValue(index, r, rank * op.count + i, replay);
      return sum;
    }
    case Kind::Broadcast: return inputValue(index, op.root, i, replay);
  }
  return 0;
}

loomResult_t enqueue(const LoopOp& op, loomComm_t comm, cudaStream_t stream) {
  switch (op.kind) {
    case Kind::AllReduce:
      return loomAllReduce(op.in->data(), op.out->data(), op.count, loomFloat32, loomSum, comm, stream);
    case Kind::AllGather: return loomAllGather(op.in->data(), op.out->data(), op.count, loomFloat32, comm, stream);
    case Kind::ReduceScatter:
      return loomReduceScatter(op.in->data(), op.out->data(), op.count, loomFloat32, loomSum, comm, stream);
    case Kind::Broadcast:
      return loomBroadcast(op.in->data(), op.out->data(), op.count, loomFloat32, op.root, comm, stream);
  }
  return loomInvalidArgument;
}

std::string captureAndReplayALoop(loomtest::RankContext& ctx, cudaStream_t stream) {
  const int n = ctx.nranks;
  // Every buffer before the ranks meet: no allocation while a peer's kernel may wait for this rank.
  std::vector<LoopOp> ops(kLoopOps);
  for (int k = 0; k < kLoopOps; ++k) {
    LoopOp& op = ops[k];
    op.kind = static_cast<Kind>(k % 4);
    op.count = kCounts[(k / 4) % std::size(kCounts)];
    op.root = k % n;
    op.in = std::make_unique<DeviceBuffer>(inputCount(op, n) * sizeof(float), 100 + k);
    op.out = std::make_unique<DeviceBuffer>(outputCount(op, n) * sizeof(float), 300 + k);
  }
  auto upload = [&](int replay) {
    for (int k = 0; k < kLoopOps; ++k) {
      std::vector<float> host(inputCount(ops[k], n));
      for (size_t i = 0; i < host.size(); ++i) host[i] = inputValue(k, ctx.rank, i, replay);
      ops[k].in->upload(host.data(), host.size() * sizeof(float));
    }
  };
  auto check = [&](int replay, const std::string& what) {
    std::string found;
    for (int k = 0; k < kLoopOps && found.empty(); ++k) {
      const std::vector<uint8_t> bytes = ops[k].out->download();
      const auto* out = reinterpret_cast<const float*>(bytes.data());
      for (size_t i = 0; i < outputCount(ops[k], n); ++i)
        if (const float want = expected(ops[k], k, n, ctx.rank, i, replay); out[i] != want) {
          found += " " + what + ", collective " + std::to_string(k) + " (kind " +
                   std::to_string(static_cast<int>(ops[k].kind)) + ", count " + std::to_string(ops[k].count) +
                   "): element " + std::to_string(i) + " is " + std::to_string(out[i]) + ", want " +
                   std::to_string(want) + ";";
          break;
        }
      found += ops[k].in->checkGuards("input " + std::to_string(k)) + ops[k].out->checkGuards("output " + std::to_string(k));
    }
    return found;
  };
  upload(0);
  if (std::string met = meetOnTheHost(ctx); !met.empty()) return met;
  // The loop once eagerly first, as a training step warms up before it is captured: a communicator sets
  // its GPU transport up at its first device operation, which cannot happen inside a capture.
  for (int k = 0; k < kLoopOps; ++k)
    if (const loomResult_t r = enqueue(ops[k], ctx.comm, stream); r != loomSuccess)
      return loomtest::callFailure(("eager collective " + std::to_string(k)).c_str(), r, ctx.comm);
  cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  if (std::string wrong = check(0, "eager"); !wrong.empty()) return wrong;
  if (std::string met = meetOnTheHost(ctx); !met.empty()) return met;

  cudaCheck(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  std::string problems;
  for (int k = 0; k < kLoopOps && problems.empty(); ++k)
    if (const loomResult_t r = enqueue(ops[k], ctx.comm, stream); r != loomSuccess)
      problems = loomtest::callFailure(("collective " + std::to_string(k) + " in the capture").c_str(), r, ctx.comm);
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  if (ended != cudaSuccess) problems += std::string(" the capture broke: ") + cudaGetErrorString(ended) + ";";
  if (!problems.empty()) {
    if (graph) cudaGraphDestroy(graph);
    return problems;
  }
  cudaGraphExec_t exec = nullptr;
  cudaCheck(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  cudaGraphDestroy(graph);

  for (int replay = 1; replay <= kReplays && problems.empty(); ++replay) {
    upload(replay);  // the graph reads its buffers by address: new inputs, the same graph
    if (std::string met = meetOnTheHost(ctx); !met.empty()) problems += met;  // every rank's inputs are in
    cudaCheck(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
    cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    problems += check(replay, "replay " + std::to_string(replay));
  }
  cudaGraphExecDestroy(exec);
  // Eager work goes on after the replays (the application ordered them: one stream).
  if (problems.empty()) {
    if (const loomResult_t r = enqueue(ops[0], ctx.comm, stream); r != loomSuccess)
      problems += loomtest::callFailure("an eager all-reduce after the replays", r, ctx.comm);
    cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  }
  loomResult_t async = loomSuccess;
  loomCommGetAsyncError(ctx.comm, &async);
  if (async != loomSuccess) problems += " async error " + std::to_string(async) + ": " + loomGetLastError(ctx.comm);
  if (std::string met = meetOnTheHost(ctx); !met.empty()) problems += met;  // before the buffers go
  return problems;
}

class GraphLoops : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { LOOM_REQUIRE_GPU(); }
};

TEST_P(GraphLoops, AHundredCollectivesCapturedAndReplayed) {
  loomtest::RunOptions run;
  run.timeoutSec = 300;
  EXPECT_EQ(loomtest::runRanks(loomtest::Launch::Threads, GetParam(), run,
                               [](loomtest::RankContext& ctx) { return withStreamOnGpu0(ctx, captureAndReplayALoop); }),
            "");
}

INSTANTIATE_TEST_SUITE_P(Ranks, GraphLoops, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int>& info) { return "n" + std::to_string(info.param); });

}  // namespace
}  // namespace loomgpu
