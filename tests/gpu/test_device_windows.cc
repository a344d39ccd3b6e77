// Windows (loomCommWindowRegister): rank processes sharing one GPU run peer-memory plans on buffers in
// windows, reading each other's buffers at their own mappings of the windows (device/peer_windows.h).
// In process-plans mode (rank processes, FakeCuda's CUDA IPC maps a peer's memory at another address
// than the peer's own, so a buffer used at the address its owner published would be the wrong memory)
// the collectives peer-memory plans serve run on windowed buffers and are checked element by element,
// in and out of place; that they ran as peer-memory plans is read from the kernel profile (one lane,
// LOOM_NCHANNELS=1: a peer-memory plan's lane has 3 or 4 steps, a FIFO ring's of 4 MiB over 512 KiB
// slots many more; LOOM_ALGO=peer asks for them where they can serve). After the windows end, the same call runs through FIFOs again. Rank threads (peer
// mode) need no window: registration is bookkeeping there, and the collectives run alike. The windows
// are registered inside a group, as nccl-tests does (they run at its end). Bad
// registrations fail on every rank, naming the rank and the reason.
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

constexpr size_t kWindowCount = 1 << 20;  // floats per rank: 4 MiB, several FIFO steps per lane
constexpr uint32_t kMostPeerStepsPerLane = 4;

loomtest::Launch windowLaunch() {
  return gpuMode() == GpuMode::ProcessPlans ? loomtest::Launch::Processes : loomtest::Launch::Threads;
}

bool windowsNeeded() { return gpuMode() == GpuMode::ProcessPlans; }

float inputOf(int rank, size_t i) { return static_cast<float>((i * 7 + static_cast<size_t>(rank) * 13) % 61); }

// Steps per lane of the launches since the last read (the profile, reset as it is read).
std::string stepsPerLane(loomtest::RankContext& ctx, double* out) {
  loomDeviceProfile_t p = {};
  if (loomCommDeviceProfile(ctx.comm, &p, 1) != loomSuccess) return " profile: " + std::string(loomGetLastError(ctx.comm)) + ";";
  if (p.lanes == 0) return " no lane reported;";
  *out = static_cast<double>(p.steps) / static_cast<double>(p.lanes);
  return "";
}

// One collective on the windowed buffers, checked on every element, and whether its lanes took the
// peer-memory plan's few steps as `wantPeer` says.
struct WindowCase {
  const char* name;
  loomResult_t (*run)(loomtest::RankContext&, DeviceBuffer&, DeviceBuffer&, cudaStream_t);
  float (*want)(int nranks, int rank, size_t i);
  size_t outCount;  // elements of the output checked
  bool inPlace;
};

loomResult_t allReduce(loomtest::RankContext& ctx, DeviceBuffer& send, DeviceBuffer& recv, cudaStream_t s) {
  return loomAllReduce(send.data(), recv.data(), kWindowCount, loomFloat32, loomSum, ctx.comm, s);
}
constexpr size_t kSmallCount = 4096;  // 16 KiB: the one-shot plan (LOOM_ALGO below)
loomResult_t smallAllReduce(loomtest::RankContext& ctx, DeviceBuffer& send, DeviceBuffer& recv, cudaStream_t s) {
  return loomAllReduce(send.data(), recv.data(), kSmallCount, loomFloat32, loomSum, ctx.comm, s);
}
loomResult_t allReduceInPlace(loomtest::RankContext& ctx, DeviceBuffer& send, DeviceBuffer&, cudaStream_t s) {
  return loomAllReduce(send.data(), send.data(), kWindowCount, loomFloat32, loomSum, ctx.comm, s);
}
float sumOf(int nranks, int, size_t i) {
  float total = 0;
  for (int r = 0; r < nranks; ++r) total += inputOf(r, i);
  return total;
}
loomResult_t allGather(loomtest::RankContext& ctx, DeviceBuffer& send, DeviceBuffer& recv, cudaStream_t s) {
  return loomAllGather(send.data(), recv.data(), kWindowCount / ctx.nranks, loomFloat32, ctx.comm, s);
}
float gathered(int nranks, int, size_t i) {
  const size_t block = kWindowCount / static_cast<size_t>(nranks);
  return inputOf(static_cast<int>(i / block), i % block);
}
loomResult_t reduceScatter(loomtest::RankContext& ctx, DeviceBuffer& send, DeviceBuffer& recv, cudaStream_t s) {
  return loomReduceScatter(send.data(), recv.data(), kWindowCount / ctx.nranks, loomFloat32, loomSum, ctx.comm, s);
}
float scatteredSum(int nranks, int rank, size_t i) { return sumOf(nranks, rank, static_cast<size_t>(rank) * (kWindowCount / nranks) + i); }
loomResult_t broadcast(loomtest::RankContext& ctx, DeviceBuffer& send, DeviceBuffer& recv, cudaStream_t s) {
  return loomBroadcast(send.data(), recv.data(), kWindowCount, loomFloat32, 1, ctx.comm, s);
}
float rootsInput(int, int, size_t i) { return inputOf(1, i); }

std::string runCase(loomtest::RankContext& ctx, cudaStream_t stream, DeviceBuffer& send, DeviceBuffer& recv,
                    const WindowCase& c, bool wantPeer) {
  std::vector<float> input(kWindowCount);
  for (size_t i = 0; i < kWindowCount; ++i) input[i] = inputOf(ctx.rank, i);
  send.upload(input.data(), kWindowCount * sizeof(float));
  cudaCheck(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  if (std::string met = meetOnTheHost(ctx); !met.empty()) return met;
  const std::string where = std::string(" ") + c.name + (wantPeer ? " in windows:" : " after the windows:");
  if (loomResult_t r = c.run(ctx, send, recv, stream); r != loomSuccess)
    return where + " " + loomtest::callFailure(c.name, r, ctx.comm) + ";";
  cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  std::string problems;
  const std::vector<uint8_t> out = (c.inPlace ? send : recv).download();
  const float* got = reinterpret_cast<const float*>(out.data());
  for (size_t i = 0; i < c.outCount; ++i) {
    const float want = c.want(ctx.nranks, ctx.rank, i);
    if (got[i] != want) {
      problems += where + " element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", want " +
                  std::to_string(want) + ";";
      break;
    }
  }
  double steps = 0;
  problems += stepsPerLane(ctx, &steps);
  if (problems.empty() && (steps <= kMostPeerStepsPerLane) != wantPeer)
    problems += where + " " + std::to_string(steps) + " steps per lane: " +
                (wantPeer ? "not a peer-memory plan" : "a peer-memory plan outside windows") + ";";
  if (std::string met = meetOnTheHost(ctx); !met.empty()) problems += met;  // before the inputs change
  return problems;
}

std::string windowedCollectives(loomtest::RankContext& ctx, cudaStream_t stream) {
  DeviceBuffer send(kWindowCount * sizeof(float), 3), recv(kWindowCount * sizeof(float), 5);
  loomWindow_t sendWindow = nullptr, recvWindow = nullptr;
  // In a group, as nccl-tests registers (the registrations run at its end, in call order).
  LT_CALL(ctx.comm, loomGroupStart());
  LT_CALL(ctx.comm, loomCommWindowRegister(ctx.comm, send.data(), kWindowCount * sizeof(float), &sendWindow));
  LT_CALL(ctx.comm, loomCommWindowRegister(ctx.comm, recv.data(), kWindowCount * sizeof(float), &recvWindow));
  LT_CALL(ctx.comm, loomGroupEnd());
  void* user = nullptr;
  LT_CALL(ctx.comm, loomWindowGetUserPtr(ctx.comm, recvWindow, &user));
  std::string problems;
  if (user != recv.data()) problems += " loomWindowGetUserPtr gives another buffer;";
  const WindowCase cases[] = {
      {"loomAllReduce", allReduce, sumOf, kWindowCount, false},
      {"loomAllReduce (in place)", allReduceInPlace, sumOf, kWindowCount, true},
      {"loomAllReduce (16 KiB, one-shot: its scratch is in no window)", smallAllReduce, sumOf, kSmallCount, false},
      {"loomAllGather", allGather, gathered, kWindowCount / ctx.nranks * ctx.nranks, false},
      {"loomReduceScatter", reduceScatter, scatteredSum, kWindowCount / ctx.nranks, false},
      {"loomBroadcast", broadcast, rootsInput, kWindowCount, false},
  };
  for (const WindowCase& c : cases) problems += runCase(ctx, stream, send, recv, c, true);
  LT_CALL(ctx.comm, loomCommWindowDeregister(ctx.comm, sendWindow));
  LT_CALL(ctx.comm, loomGroupStart());
  LT_CALL(ctx.comm, loomCommWindowDeregister(ctx.comm, recvWindow));
  LT_CALL(ctx.comm, loomGroupEnd());
  if (loomCommWindowDeregister(ctx.comm, sendWindow) != loomInvalidArgument) problems += " a window ended twice;";
  // Rank processes: no window, no peer-memory plan. (Rank threads take them on any buffer.)
  problems += runCase(ctx, stream, send, recv, cases[0], !windowsNeeded());
  return problems + send.checkGuards("send") + recv.checkGuards("recv");
}

class WindowSettings : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("LOOM_DEVICE_PROFILE", "1", 1);
    setenv("LOOM_NCHANNELS", "1", 1);
    // Peer-memory plans wherever they can serve a call (the tuner's choice among them depends on the
    // GPU's copy rate, here this machine's load); a call they cannot serve gets the tuner's choice.
    setenv("LOOM_ALGO", "peer,allreduce:0-64K:peer-oneshot", 1);
  }
  void TearDown() override {
    unsetenv("LOOM_DEVICE_PROFILE");
    unsetenv("LOOM_NCHANNELS");
    unsetenv("LOOM_ALGO");
  }
};

using DeviceWindows = WindowSettings;

TEST_F(DeviceWindows, PeerPlansReadEachRanksBuffersThroughItsWindow) {
  LOOM_REQUIRE_GPU();
  if (gpuMode() != GpuMode::ProcessPlans && gpuMode() != GpuMode::Plans)
    GTEST_SKIP() << "plan kernels on one GPU only (process-plans, peer)";
  if (const char* on = std::getenv("LOOM_DEVICE_PEER_MEMORY"); on && std::string(on) == "0")
    GTEST_SKIP() << "peer-memory plans are off (LOOM_DEVICE_PEER_MEMORY=0)";
  for (int nranks : {2, 3}) {
    loomtest::RunOptions run;
    run.timeoutSec = 300;
    EXPECT_EQ(loomtest::runRanks(windowLaunch(), nranks, run,
                                 [](loomtest::RankContext& ctx) { return withStreamOnGpu0(ctx, windowedCollectives); }),
              "")
        << nranks << " ranks";
  }
}

// Rank 1's buffer is host memory, then its range overlaps its window: every rank fails, naming rank 1.
std::string badRegistrations(loomtest::RankContext& ctx, cudaStream_t) {
  DeviceBuffer buffer(1 << 16, 7);
  std::vector<char> host(1 << 16);
  std::string problems;
  auto expectRefused = [&](void* p, size_t bytes, const char* what, const char* reason) {
    loomWindow_t w = nullptr;
    const loomResult_t r = loomCommWindowRegister(ctx.comm, p, bytes, &w);
    const std::string why = loomGetLastError(ctx.comm);
    if (r != loomInvalidArgument || w != nullptr || why.find("rank 1") == std::string::npos ||
        why.find(reason) == std::string::npos)
      problems += std::string(" ") + what + ": " + std::to_string(r) + " (" + why + ");";
  };
  expectRefused(ctx.rank == 1 ? static_cast<void*>(host.data()) : buffer.data(), 4096, "host memory",
                "not CUDA device memory");
  loomWindow_t whole = nullptr;
  LT_CALL(ctx.comm, loomCommWindowRegister(ctx.comm, buffer.data(), 4096, &whole));
  expectRefused(ctx.rank == 1 ? buffer.data() + 1024 : buffer.data() + 8192, 4096, "an overlap", "overlap");
  loomWindow_t none = nullptr;
  if (loomCommWindowRegister(ctx.comm, buffer.data(), 4096, nullptr) != loomInvalidArgument)
    problems += " a NULL handle accepted;";
  if (loomCommWindowDeregister(ctx.comm, reinterpret_cast<loomWindow_t>(&none)) != loomInvalidArgument)
    problems += " a bogus window deregistered;";
  LT_CALL(ctx.comm, loomCommWindowDeregister(ctx.comm, whole));
  return problems + buffer.checkGuards("buffer");
}

TEST_F(DeviceWindows, BadRegistrationsFailOnEveryRankNamingTheRank) {
  LOOM_REQUIRE_GPU();
  loomtest::RunOptions run;
  run.timeoutSec = 120;
  EXPECT_EQ(loomtest::runRanks(windowLaunch(), 2, run,
                               [](loomtest::RankContext& ctx) { return withStreamOnGpu0(ctx, badRegistrations); }),
            "");
}

}  // namespace
}  // namespace loomgpu
