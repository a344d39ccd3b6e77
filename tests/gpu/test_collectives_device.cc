// Every collective on CUDA device buffers, 2-4 ranks on ONE GPU (device 0), checked element by
// element (device_cases.h). The ranks run as LOOM_TEST_GPU_MODE says (gpu_support.h): threads of this
// process, staged or as plan kernels; forked processes (this process never initializes CUDA before
// forking: the GPU probe runs in a child); or processes that each say they are on a host of their own
// (LOOM_HOSTID), so that plan kernels reach each other through network lanes (the proxy over the
// network provider, src/device/net_lane_fifos.h). Skips with the reason when no GPU is present.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
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

Launch launch() {
  const GpuMode mode = gpuMode();
  return mode == GpuMode::Processes || mode == GpuMode::Hosts || mode == GpuMode::ProcessPlans ? Launch::Processes
                                                                                                : Launch::Threads;
}
// Plan kernels on one GPU: rank threads, or rank processes through CUDA IPC.
bool planKernelsOnOneGpu() { return gpuMode() == GpuMode::Plans || gpuMode() == GpuMode::ProcessPlans; }
// Plan kernels run: as rank threads, as rank processes through CUDA IPC, or through network lanes.
bool planKernels() {
  return gpuMode() == GpuMode::Plans || gpuMode() == GpuMode::Hosts || gpuMode() == GpuMode::ProcessPlans;
}

// Each rank a host of its own: every peer is reached through network lanes.
std::string ownHost(int rank) {
  setenv("LOOM_HOSTID", ("gpu-host-" + std::to_string(rank)).c_str(), 1);
  return "";
}

void placeRanks(loomtest::RunOptions* run) {
  if (gpuMode() == GpuMode::Hosts) run->placeRank = ownHost;
}

// Whether a call on device buffers returns before its stream reaches it: processes are staged in
// stream order, plan kernels are launched; threads without plan kernels are staged synchronously.
bool callsReturnAtOnce() { return gpuMode() != GpuMode::Threads; }

void expectPasses(int nranks, const std::vector<MatrixSpec>& specs, const DeviceRunOptions& options = {}) {
  loomtest::RunOptions run;
  run.timeoutSec = 600;
  placeRanks(&run);
  std::string failures = loomtest::runRanks(launch(), nranks, run, [&](loomtest::RankContext& ctx) -> std::string {
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

// Runs `body(ctx, stream)` on each of n ranks with GPU 0 current and a non-blocking stream of the
// rank's own (destroyed afterwards); every rank must return "". Bodies allocate what they need first
// and meet (meetOnTheHost) before their first launch (device_cases.h says why).
template <class Body>
void expectOnEveryRank(int n, Body body) {
  loomtest::RunOptions run;
  run.timeoutSec = 300;
  placeRanks(&run);
  const std::string failures =
      loomtest::runRanks(launch(), n, run, [&](loomtest::RankContext& ctx) { return withStreamOnGpu0(ctx, body); });
  EXPECT_EQ(failures, "");
}


// Waits up to 60 s for process `pid` to exit (its pidfd turns readable): "" once it did, else why not.
std::string waitUntilGone(int pid, const char* who) {
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) return " pidfd_open: " + std::string(std::strerror(errno)) + ";";
  pollfd gone{pidfd, POLLIN, 0};
  const int polled = poll(&gone, 1, 60000);
  close(pidfd);
  return polled == 1 ? "" : std::string(" ") + who + " did not leave within 60 s;";
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
  if (gpuMode() == GpuMode::Plans) GTEST_SKIP() << "rank threads as plan kernels refuse it (the next test)";
  DeviceRunOptions options;
  options.useNullStream = true;
  expectPasses(GetParam(),
               {{.colls = {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter},
                 .dtypes = {loomFloat32, loomBfloat16},
                 .ops = {Op::Sum, Op::Avg},
                 .counts = {1, 65537}}},
               options);
}

// Plan kernels of ranks that are threads on one GPU cannot share the legacy default stream, one queue
// for the whole process, since their kernels wait for each other: a call on it is refused before
// anything is enqueued, and the communicator goes on working on created streams.
TEST_P(DeviceCollectives, NullStreamIsRefusedWhereItWouldSerializeRanks) {
  if (gpuMode() != GpuMode::Plans) GTEST_SKIP() << "rank threads as plan kernels only";
  expectOnEveryRank(GetParam(), [&](loomtest::RankContext& ctx, cudaStream_t stream) -> std::string {
    const size_t count = 1000;
    std::vector<float> host(count, 1.0f);
    DeviceBuffer buf(count * sizeof(float), 23);
    buf.upload(host.data(), count * sizeof(float));
    if (std::string met = meetOnTheHost(ctx); !met.empty()) return met;
    std::string problems;
    const loomResult_t refused = loomAllReduce(buf.data(), buf.data(), count, loomFloat32, loomSum, ctx.comm, nullptr);
    const std::string why = loomGetLastError(ctx.comm);
    if (refused != loomInvalidUsage) problems += " the call on the legacy stream returned " + std::to_string(refused) + ";";
    if (why.find("legacy default stream") == std::string::npos) problems += " its error says: " + why + ";";
    const loomResult_t after = loomAllReduce(buf.data(), buf.data(), count, loomFloat32, loomSum, ctx.comm, stream);
    if (after != loomSuccess) return problems + loomtest::callFailure("loomAllReduce on a created stream", after, ctx.comm);
    cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    const std::vector<uint8_t> bytes = buf.download();
    const float got = reinterpret_cast<const float*>(bytes.data())[count - 1];
    if (got != static_cast<float>(GetParam())) problems += " after the refusal: " + std::to_string(got) + ";";
    return problems + buf.checkGuards("buffer");
  });
}

// A buffer that is not aligned to its elements would trap the GPU (a sticky error that ends the
// process's context): refused with loomInvalidArgument before anything is enqueued.
TEST_P(DeviceCollectives, MisalignedBuffersAreRefused) {
  if (!planKernelsOnOneGpu()) GTEST_SKIP() << "plan kernels on one GPU only";
  expectOnEveryRank(GetParam(), [&](loomtest::RankContext& ctx, cudaStream_t stream) -> std::string {
    const size_t count = 1000;
    DeviceBuffer buf(count * sizeof(float) + 4, 29);
    if (std::string met = meetOnTheHost(ctx); !met.empty()) return met;
    const std::vector<uint8_t> before = buf.download();
    float* odd = reinterpret_cast<float*>(buf.data() + 2);
    const loomResult_t r = loomAllReduce(odd, odd, count, loomFloat32, loomSum, ctx.comm, stream);
    std::string problems;
    if (r != loomInvalidArgument) problems += " a misaligned buffer gave " + std::to_string(r) + ";";
    if (std::string(loomGetLastError(ctx.comm)).find("aligned") == std::string::npos)
      problems += std::string(" its error says: ") + loomGetLastError(ctx.comm) + ";";
    cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    if (buf.download() != before) problems += " the buffer changed;";
    return problems + buf.checkGuards("buffer");
  });
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

// A device scalar is read in stream order: the value a copy enqueued before the call leaves there (the
// stream is held for 200 ms first, so a read at call time would see the old one).
TEST_P(DeviceCollectives, DeviceScalarIsReadInStreamOrder) {
  const int n = GetParam();
  expectOnEveryRank(n, [&](loomtest::RankContext& ctx, cudaStream_t stream) -> std::string {
    const size_t count = 4099;
    const float one = 1.0f;
    float* two = nullptr;
    cudaCheck(cudaMallocHost(reinterpret_cast<void**>(&two), sizeof(float)), "cudaMallocHost");
    *two = 2.0f;
    DeviceBuffer scalar(sizeof(float), 5);
    scalar.upload(&one, sizeof one);
    std::vector<float> host(count, static_cast<float>(ctx.rank + 1));
    DeviceBuffer buf(count * sizeof(float), 13);
    buf.upload(host.data(), count * sizeof(float));
    if (std::string met = meetOnTheHost(ctx); !met.empty()) return met;
    loomRedOp_t op{};
    loomResult_t r = loomRedOpCreatePreMulSum(&op, scalar.data(), loomFloat32, loomScalarDevice, ctx.comm);
    if (r != loomSuccess) return loomtest::callFailure("loomRedOpCreatePreMulSum", r, ctx.comm);
    cudaCheck(cudaLaunchHostFunc(stream, [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(200)); }, nullptr),
              "cudaLaunchHostFunc");
    cudaCheck(cudaMemcpyAsync(scalar.data(), two, sizeof(float), cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync");
    r = loomAllReduce(buf.data(), buf.data(), count, loomFloat32, op, ctx.comm, stream);
    if (r != loomSuccess) return loomtest::callFailure("loomAllReduce", r, ctx.comm);
    cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    std::string problems;
    const std::vector<uint8_t> bytes = buf.download();
    const auto* out = reinterpret_cast<const float*>(bytes.data());
    const float want = static_cast<float>(n * (n + 1));  // 2 x (1 + ... + n)
    for (size_t i = 0; i < count; ++i)
      if (out[i] != want) {
        problems += " element " + std::to_string(i) + " is " + std::to_string(out[i]) + ", want " + std::to_string(want) + ";";
        break;
      }
    problems += buf.checkGuards("buffer");
    loomRedOpDestroy(op, ctx.comm);
    cudaFreeHost(two);
    return problems;
  });
}

// A collective on a stream being captured into a CUDA graph before the communicator ever ran on device
// buffers (plan kernels set their transport up then), or one that would be staged through host memory,
// is refused before anything is enqueued: the capture ends cleanly, and the communicator still works.
TEST_P(DeviceCollectives, StreamCaptureIsRefusedCleanly) {
  expectOnEveryRank(GetParam(), [&](loomtest::RankContext& ctx, cudaStream_t stream) -> std::string {
    const size_t count = 1000;
    std::vector<float> host(count, 1.0f);
    DeviceBuffer buf(count * sizeof(float), 17);
    buf.upload(host.data(), count * sizeof(float));
    if (std::string met = meetOnTheHost(ctx); !met.empty()) return met;
    std::string problems;
    cudaCheck(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    const loomResult_t captured = loomAllReduce(buf.data(), buf.data(), count, loomFloat32, loomSum, ctx.comm, stream);
    const std::string why = loomGetLastError(ctx.comm);
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
    if (captured != loomInvalidUsage) problems += " the captured call returned " + std::to_string(captured) + ";";
    if (why.find("CUDA graph") == std::string::npos) problems += " its error says: " + why + ";";
    if (ended != cudaSuccess) problems += std::string(" the capture broke: ") + cudaGetErrorString(ended) + ";";
    if (graph) cudaGraphDestroy(graph);
    const loomResult_t after = loomAllReduce(buf.data(), buf.data(), count, loomFloat32, loomSum, ctx.comm, stream);
    if (after != loomSuccess) return problems + loomtest::callFailure("loomAllReduce after the capture", after, ctx.comm);
    cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    const std::vector<uint8_t> bytes = buf.download();
    const float got = reinterpret_cast<const float*>(bytes.data())[count - 1];
    if (got != static_cast<float>(GetParam())) problems += " after the capture: " + std::to_string(got) + ";";
    return problems;
  });
}

// As plan kernels, a collective captured into a CUDA graph (after one outside it set the transport up)
// runs at every replay on what the buffer then holds; staged, the capture is refused.
TEST_P(DeviceCollectives, CapturedIntoACudaGraph) {
  const int n = GetParam();
  expectOnEveryRank(n, [&](loomtest::RankContext& ctx, cudaStream_t stream) -> std::string {
    const size_t count = 70001;
    DeviceBuffer buf(count * sizeof(float), 19);
    auto fill = [&](float v) {
      std::vector<float> host(count, v);
      buf.upload(host.data(), count * sizeof(float));
    };
    fill(1.0f);
    if (std::string met = meetOnTheHost(ctx); !met.empty()) return met;
    loomResult_t r = loomAllReduce(buf.data(), buf.data(), count, loomFloat32, loomSum, ctx.comm, stream);
    if (r != loomSuccess) return loomtest::callFailure("loomAllReduce before the capture", r, ctx.comm);
    cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    cudaCheck(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    r = loomAllReduce(buf.data(), buf.data(), count, loomFloat32, loomSum, ctx.comm, stream);
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
    std::string problems;
    if (ended != cudaSuccess) problems += std::string(" the capture broke: ") + cudaGetErrorString(ended) + ";";
    if (!planKernels()) {  // staged: the capture is refused
      if (r != loomInvalidUsage) problems += " a staged collective was captured (" + std::to_string(r) + ");";
      if (graph) cudaGraphDestroy(graph);
      return problems + buf.checkGuards("buffer");
    }
    if (r != loomSuccess) return problems + loomtest::callFailure("loomAllReduce in the capture", r, ctx.comm);
    // No graph memory nodes: CUDA may order graphs that allocate from its graph pool after each other,
    // and the ranks' graphs wait for each other (the first GPU run deadlocked so with 3 and 4 ranks).
    size_t nodes = 0;
    cudaCheck(cudaGraphGetNodes(graph, nullptr, &nodes), "cudaGraphGetNodes");
    std::vector<cudaGraphNode_t> all(nodes);
    if (nodes) cudaCheck(cudaGraphGetNodes(graph, all.data(), &nodes), "cudaGraphGetNodes");
    for (cudaGraphNode_t node : all) {
      cudaGraphNodeType type{};
      cudaCheck(cudaGraphNodeGetType(node, &type), "cudaGraphNodeGetType");
      if (type == cudaGraphNodeTypeMemAlloc || type == cudaGraphNodeTypeMemFree) {
        cudaGraphDestroy(graph);  // not replayed: it would wait until the lanes' timeout
        return problems + " the captured graph allocates or frees memory (a graph memory node);";
      }
    }
    cudaGraphExec_t exec = nullptr;
    cudaCheck(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
    if (std::string met = meetOnTheHost(ctx); !met.empty()) return problems + met;
    for (int replay = 0; replay < 3 && problems.empty(); ++replay) {
      fill(static_cast<float>(ctx.rank + 1 + replay));
      cudaCheck(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
      cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      const std::vector<uint8_t> bytes = buf.download();
      const auto* out = reinterpret_cast<const float*>(bytes.data());
      const float want = static_cast<float>(n * (n + 1) / 2 + n * replay);
      for (size_t i = 0; i < count; ++i)
        if (out[i] != want) {
          problems += " replay " + std::to_string(replay) + ": element " + std::to_string(i) + " is " +
                      std::to_string(out[i]) + ", want " + std::to_string(want) + ";";
          break;
        }
    }
    loomResult_t async = loomSuccess;
    loomCommGetAsyncError(ctx.comm, &async);
    if (async != loomSuccess) problems += " async error " + std::to_string(async) + ": " + loomGetLastError(ctx.comm);
    cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    problems += buf.checkGuards("buffer");
    return problems;
  });
}

// A host collective right after device ones: with rank processes the device buffers are staged in
// stream order by a progress thread that the first of them starts, which must count every operation
// before it as done (a host operation after it once waited forever).
TEST_P(DeviceCollectives, HostCollectiveAfterDeviceCollectives) {
  expectOnEveryRank(GetParam(), [&](loomtest::RankContext& ctx, cudaStream_t stream) -> std::string {
    const size_t count = 4096;
    DeviceBuffer buf(count * sizeof(float), 43);
    if (std::string met = meetOnTheHost(ctx); !met.empty()) return met;
    for (int i = 0; i < 3; ++i) {
      const loomResult_t r = loomAllReduce(buf.data(), buf.data(), count, loomFloat32, loomSum, ctx.comm, stream);
      if (r != loomSuccess) return loomtest::callFailure("loomAllReduce on device memory", r, ctx.comm);
    }
    cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    int one = 1, all = 0;
    const loomResult_t r = loomAllReduce(&one, &all, 1, loomInt32, loomSum, ctx.comm, nullptr);
    if (r != loomSuccess) return loomtest::callFailure("loomAllReduce on host memory after them", r, ctx.comm);
    return all == ctx.nranks ? "" : "the host allreduce gave " + std::to_string(all);
  });
}

// 1 MiB+ elements: staging of large buffers (several pinned blocks, plan chunking).
TEST_P(DeviceCollectives, Large) {
  expectPasses(GetParam(), {{.colls = {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter},
                             .dtypes = {loomFloat32, loomFloat16},
                             .ops = {Op::Sum},
                             .counts = {(size_t{1} << 20) + 5}}});
}

// Plans whose encoding is larger than a launch slot (hundreds of steps per lane: small chunks over a
// large buffer), several collectives in a row: the first launch of each shape sends its encoding from
// pageable memory. It used to take a pinned block, and with the warmed ones held by launches in flight
// a fresh cudaHostAlloc synchronized the device while a peer's kernel waited for this rank's launch:
// every rank hung until the timeout.
TEST_P(DeviceCollectives, EncodingsLargerThanASlot) {
  if (!planKernelsOnOneGpu()) GTEST_SKIP() << "plan kernels on one GPU only";
  if (GetParam() != 3) GTEST_SKIP() << "one rank count suffices";
  setenv("LOOM_ALGO", "direct", 1);
  setenv("LOOM_CHUNK_BYTES", "16384", 1);
  setenv("LOOM_NCHANNELS", "1", 1);
  expectPasses(GetParam(), {{.colls = {Coll::AllGather, Coll::AllReduce, Coll::ReduceScatter},
                             .dtypes = {loomFloat32},
                             .ops = {Op::Sum},
                             .counts = {(size_t{1} << 20) + 5}}});
  unsetenv("LOOM_ALGO");
  unsetenv("LOOM_CHUNK_BYTES");
  unsetenv("LOOM_NCHANNELS");
}

// Ranks that are threads of one process write into each other's buffers directly where the receiver
// waits first (the p2p transport's direct mode); the same collectives with it off (LOOM_P2P_DIRECT=0,
// read at every launch) put every message through the FIFO slots.
TEST_P(DeviceCollectives, SlotsOnlyWithoutDirectMode) {
  if (gpuMode() != GpuMode::Plans) GTEST_SKIP() << "rank threads as plan kernels only";
  setenv("LOOM_P2P_DIRECT", "0", 1);
  expectPasses(GetParam(), {{.colls = {Coll::AllReduce, Coll::AllGather, Coll::Broadcast, Coll::SendRecv},
                             .dtypes = {loomFloat32},
                             .ops = {Op::Sum},
                             .counts = {1000, (size_t{1} << 20) + 5}}});
  unsetenv("LOOM_P2P_DIRECT");
}

// A rank that dies between two operations: the survivor sees it (on hosts of their own, its proxy sees
// the network lanes break; on one GPU, its peer watch sees the process exit), and the survivor's next
// operation fails naming it, long before the lanes' own timeout (LOOM_TIMEOUT_MS).
TEST_P(DeviceCollectives, APeerThatDiesIsNamedBeforeTheTimeout) {
  if (gpuMode() != GpuMode::Hosts && gpuMode() != GpuMode::ProcessPlans)
    GTEST_SKIP() << "rank processes as plan kernels only (on hosts of their own, or on one GPU)";
  if (GetParam() != 2) GTEST_SKIP() << "one rank count suffices";
  expectOnEveryRank(2, [&](loomtest::RankContext& ctx, cudaStream_t stream) -> std::string {
    const size_t count = 4096;
    DeviceBuffer buf(count * sizeof(float), 41);
    if (std::string met = meetOnTheHost(ctx); !met.empty()) return met;
    loomResult_t r = loomAllReduce(buf.data(), buf.data(), count, loomFloat32, loomSum, ctx.comm, stream);
    if (r != loomSuccess) return loomtest::callFailure("the first loomAllReduce", r, ctx.comm);
    cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    if (ctx.rank == 1) _exit(0);  // gone without a word: no communicator destroyed, no goodbye
    const auto start = std::chrono::steady_clock::now();
    r = loomAllReduce(buf.data(), buf.data(), count, loomFloat32, loomSum, ctx.comm, stream);
    cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    loomResult_t async = loomSuccess;
    loomCommGetAsyncError(ctx.comm, &async);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string why = loomGetLastError(ctx.comm);
    std::string problems;
    if (r == loomSuccess && async == loomSuccess) problems += " the allreduce with a dead peer succeeded;";
    // On hosts of their own the network lane to rank 1 breaks; on one host the peer watch sees its
    // process exit (plan_kernels.h).
    const char* cause = gpuMode() == GpuMode::Hosts ? "network lane" : "died (its process exited)";
    if (why.find("rank 1") == std::string::npos || why.find(cause) == std::string::npos)
      problems += std::string(" the error does not say that rank 1 is lost (") + cause + "): " + why + ";";
    if (seconds > 15) problems += " it took " + std::to_string(seconds) + " s;";
    return problems;
  });
}

// A peer that finished its part of a collective and left while this rank's launch still runs (a tail
// that needs no more of it) is no error: the launch ends, and the communicator is not failed. FakeCuda
// holds rank 0's kernel LOOM_FAKE_CUDA_KERNEL_TAIL_MS after its blocks ended, so that rank 1 leaves in
// that window. (CI runs saw this fail now and then: a peer of a test merely left first.)
TEST_P(DeviceCollectives, APeerThatLeavesDuringALaunchsTailIsNoError) {
#ifndef LOOM_FAKE_CUDA
  GTEST_SKIP() << "FakeCuda only: the window is held open by its kernel tail";
#endif
  if (gpuMode() != GpuMode::Hosts && gpuMode() != GpuMode::ProcessPlans)
    GTEST_SKIP() << "rank processes as plan kernels only (on hosts of their own, or on one GPU)";
  if (GetParam() != 2) GTEST_SKIP() << "one rank count suffices";
  expectOnEveryRank(2, [&](loomtest::RankContext& ctx, cudaStream_t stream) -> std::string {
    const size_t count = 4099;
    std::vector<float> host(count, static_cast<float>(ctx.rank + 1));
    DeviceBuffer buf(count * sizeof(float), 53);
    buf.upload(host.data(), count * sizeof(float));
    int32_t pids[2] = {0, 0};
    const int32_t pid = static_cast<int32_t>(getpid());
    loomResult_t r = loomAllGather(&pid, pids, 1, loomInt32, ctx.comm, nullptr);
    if (r != loomSuccess) return loomtest::callFailure("loomAllGather of the pids", r, ctx.comm);
    if (ctx.rank == 0) setenv("LOOM_FAKE_CUDA_KERNEL_TAIL_MS", "3000", 1);
    r = loomAllReduce(buf.data(), buf.data(), count, loomFloat32, loomSum, ctx.comm, stream);
    unsetenv("LOOM_FAKE_CUDA_KERNEL_TAIL_MS");
    if (r != loomSuccess) return loomtest::callFailure("loomAllReduce", r, ctx.comm);
    std::string problems;
    if (ctx.rank == 0) {  // rank 1 leaves once its part is done: the harness destroys its communicator
      if (std::string gone = waitUntilGone(pids[1], "rank 1"); !gone.empty()) return gone;
      if (cudaStreamQuery(stream) != cudaErrorNotReady)
        problems += " rank 0's launch ended before rank 1 left (the test's window was missed);";
    }
    cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    loomResult_t async = loomSuccess;
    loomCommGetAsyncError(ctx.comm, &async);
    if (async != loomSuccess) problems += " the communicator failed: " + std::string(loomGetLastError(ctx.comm)) + ";";
    const std::vector<uint8_t> bytes = buf.download();
    const float got = reinterpret_cast<const float*>(bytes.data())[count - 1];
    if (got != 3.0f) problems += " the sum is " + std::to_string(got) + ", want 3;";
    return problems + buf.checkGuards("buffer");
  });
}

// A peer that finished its work and left after a CUDA graph was captured is no error: the graph may
// never run again. A replay is: it stops (its lanes would wait on the peer until the timeout), and the
// error names the peer. (A CI run once saw the communicator fail when a peer of a test that had
// captured a graph merely left first.)
TEST_P(DeviceCollectives, APeerThatLeavesAfterAGraphFailsOnlyItsReplay) {
  if (gpuMode() != GpuMode::ProcessPlans) GTEST_SKIP() << "rank processes on one GPU as plan kernels only";
  if (GetParam() != 2) GTEST_SKIP() << "one rank count suffices";
  expectOnEveryRank(2, [&](loomtest::RankContext& ctx, cudaStream_t stream) -> std::string {
    const size_t count = 4096;
    DeviceBuffer buf(count * sizeof(float), 47);
    if (std::string met = meetOnTheHost(ctx); !met.empty()) return met;
    loomResult_t r = loomAllReduce(buf.data(), buf.data(), count, loomFloat32, loomSum, ctx.comm, stream);
    if (r != loomSuccess) return loomtest::callFailure("loomAllReduce before the capture", r, ctx.comm);
    cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    int32_t pids[2] = {0, 0};
    const int32_t pid = static_cast<int32_t>(getpid());
    r = loomAllGather(&pid, pids, 1, loomInt32, ctx.comm, nullptr);
    if (r != loomSuccess) return loomtest::callFailure("loomAllGather of the pids", r, ctx.comm);
    cudaCheck(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    r = loomAllReduce(buf.data(), buf.data(), count, loomFloat32, loomSum, ctx.comm, stream);
    cudaGraph_t graph = nullptr;
    cudaCheck(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
    if (r != loomSuccess) return loomtest::callFailure("loomAllReduce in the capture", r, ctx.comm);
    cudaGraphExec_t exec = nullptr;
    cudaCheck(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
    std::string problems = meetOnTheHost(ctx);
    if (ctx.rank == 1 || !problems.empty()) {  // rank 1 leaves: the harness destroys its communicator
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
      return problems;
    }
    if (std::string gone = waitUntilGone(pids[1], "rank 1"); !gone.empty()) return gone;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the peer watch's turn (no error either way)
    loomResult_t async = loomSuccess;
    loomCommGetAsyncError(ctx.comm, &async);
    if (async != loomSuccess) problems += " rank 1 left, and the communicator failed: " + std::string(loomGetLastError(ctx.comm)) + ";";
    cudaCheck(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
    cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    loomCommGetAsyncError(ctx.comm, &async);
    const std::string why = loomGetLastError(ctx.comm);
    if (async == loomSuccess) problems += " a replay with rank 1 gone succeeded;";
    else if (why.find("rank 1") == std::string::npos || why.find("died") == std::string::npos)
      problems += " the replay's error does not name rank 1: " + why + ";";
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    return problems;
  });
}

#ifdef LOOM_FAKE_CUDA
// Every block of every rank sharing a GPU must be resident at once. On a GPU that holds only 8
// plan-kernel blocks, 4 ranks get 2 each; a direct all-to-all needs 7 per channel: refused on every
// rank alike before anything is launched, while a ring (1 per channel) still runs. (FakeCuda only:
// a real GPU holds far more blocks than this many ranks need.)
TEST_P(DeviceCollectives, ShapesBeyondAGpuShareAreRefusedOnEveryRank) {
  if (gpuMode() != GpuMode::Plans) GTEST_SKIP() << "rank threads as plan kernels only";
  if (GetParam() != 4) GTEST_SKIP() << "one rank count suffices";
  loomtest::ScopedEnv blocks("LOOM_FAKE_CUDA_BLOCKS", "8");
  expectOnEveryRank(GetParam(), [&](loomtest::RankContext& ctx, cudaStream_t stream) -> std::string {
    const size_t count = 1000;
    DeviceBuffer send(4 * count * sizeof(float), 31), recv(4 * count * sizeof(float), 37);
    if (std::string met = meetOnTheHost(ctx); !met.empty()) return met;
    std::string problems;
    const loomResult_t r = loomAlltoAll(send.data(), recv.data(), count, loomFloat32, ctx.comm, stream);
    const std::string why = loomGetLastError(ctx.comm);
    if (r != loomInvalidUsage) problems += " the all-to-all returned " + std::to_string(r) + ";";
    if (why.find("resident") == std::string::npos) problems += " its error says: " + why + ";";
    cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    return problems + send.checkGuards("send") + recv.checkGuards("recv");
  });
}
#endif

// Stream order: the stream is held for 300 ms by a host function before two collectives on it.
// Ranks that are processes, and plan kernels, get NCCL's semantics: the calls return while the stream
// is still held, and the work happens in stream order after it. Ranks that are threads of one process
// without plan kernels are staged synchronously (src/device/staging.h says why), so there the
// first call waits for the stream.
TEST_P(DeviceCollectives, OrderedOnTheCallersStream) {
  const int n = GetParam();
  expectOnEveryRank(n, [&](loomtest::RankContext& ctx, cudaStream_t stream) -> std::string {
    using Clock = std::chrono::steady_clock;
    auto ms = [](Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
    const size_t count = (size_t{1} << 20) + 3;
    std::vector<float> host(count, static_cast<float>(ctx.rank + 1));
    DeviceBuffer buf(count * sizeof(float), 11);
    if (std::string met = meetOnTheHost(ctx); !met.empty()) return met;
    // The communicator's first operation on device buffers sets its GPU transport up (and may wait
    // for the stream then): one before the timed calls, on this same buffer, then the real input.
    loomResult_t r = loomAllReduce(buf.data(), buf.data(), count, loomFloat32, loomSum, ctx.comm, stream);
    if (r != loomSuccess) return loomtest::callFailure("loomAllReduce (warm-up)", r, ctx.comm);
    cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    buf.upload(host.data(), count * sizeof(float));
    cudaCheck(cudaLaunchHostFunc(stream, [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(300)); }, nullptr),
              "cudaLaunchHostFunc");
    const Clock::time_point start = Clock::now();
    r = loomAllReduce(buf.data(), buf.data(), count, loomFloat32, loomSum, ctx.comm, stream);
    const double callMs = ms(Clock::now() - start);
    if (r != loomSuccess) return loomtest::callFailure("loomAllReduce", r, ctx.comm);
    // Queued behind the first on the same stream: Max of equal sums keeps the sum.
    r = loomAllReduce(buf.data(), buf.data(), count, loomFloat32, loomMax, ctx.comm, stream);
    if (r != loomSuccess) return loomtest::callFailure("loomAllReduce", r, ctx.comm);
    cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    const double totalMs = ms(Clock::now() - start);
    loomResult_t async = loomSuccess;
    loomCommGetAsyncError(ctx.comm, &async);
    std::string problems;
    if (async != loomSuccess) problems += " async error " + std::to_string(async) + ";";
    const std::vector<uint8_t> bytes = buf.download();
    const auto* out = reinterpret_cast<const float*>(bytes.data());
    const float want = static_cast<float>(n * (n + 1) / 2);
    for (size_t i = 0; i < count; ++i)
      if (out[i] != want) {
        problems += " element " + std::to_string(i) + " is " + std::to_string(out[i]) + ", want " + std::to_string(want) + ";";
        break;
      }
    problems += buf.checkGuards("buffer");
    if (callsReturnAtOnce() && callMs > 150)
      problems += " the call waited for the held stream (" + std::to_string(callMs) + " ms);";
    if (!callsReturnAtOnce() && callMs < 250)
      problems += " threads stage synchronously, yet the call returned after " + std::to_string(callMs) + " ms;";
    if (totalMs < 290) problems += " the work did not wait for the held stream (" + std::to_string(totalMs) + " ms);";
    return problems;
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, DeviceCollectives, ::testing::Values(2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) { return "n" + std::to_string(info.param); });

}  // namespace
}  // namespace loomgpu
