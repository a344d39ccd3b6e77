// The device tuner on the machine its plan kernels run on (src/core/job_setup.h, adoptDeviceFabric):
// once two rank threads sharing one GPU set plan kernels up, their device tuner prices plans with that
// GPU's copy rate divided between them (measured at the setup: on FakeCuda a host memcpy, so only its
// presence is checked, and LOOM_GPU_COPY_GBS's value exactly), its lanes in parallel, and chooses a
// channel count from the FIFOs' channels within the lane budget: one for a small operation, and, on a
// GPU's copy rate, many for a large one; and whether peer-memory plans may run (LOOM_DEVICE_PEER_MEMORY).
// FakeCuda only: it reads the communicator's tuner.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "../api/harness.h"
#include "core/communicator.h"
#include "core/run/planner.h"
#include "model/job_model.h"
#include "device_cases.h"
#include "gpu_support.h"

namespace loomgpu {
namespace {

constexpr int kFabricRanks = 2;
constexpr size_t kFabricCount = 1024;

// One all-reduce of device buffers sets plan kernels up; then the device tuner's machine and choices.
std::string checkFabric(loomtest::RankContext& ctx, cudaStream_t stream, double wantCopyGbs, bool wantPeerMemory) {
  DeviceBuffer send(kFabricCount * sizeof(float), 3), recv(kFabricCount * sizeof(float), 5);
  std::vector<float> input(kFabricCount, 1.0f);
  send.upload(input.data(), kFabricCount * sizeof(float));
  if (std::string met = meetOnTheHost(ctx); !met.empty()) return met;
  std::string problems;
  if (loomAllReduce(send.data(), recv.data(), kFabricCount, loomFloat32, loomSum, ctx.comm, stream) != loomSuccess)
    problems += " all-reduce: " + std::string(loomGetLastError(ctx.comm)) + ";";
  cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  if (problems.empty()) {
    const loom::MachineModel m = ctx.comm->deviceTuner->machine();
    const loom::device::DeviceFabric fabric = ctx.comm->device->fabric();
    if (!m.lanesInParallel) problems += " the device machine's lanes do not run in parallel;";
    if (!(fabric.gpuCopyGbs > 0)) problems += " no GPU copy rate was measured;";
    if (wantCopyGbs > 0 && fabric.gpuCopyGbs != wantCopyGbs)
      problems += " copy rate " + std::to_string(fabric.gpuCopyGbs) + " GB/s, want LOOM_GPU_COPY_GBS's;";
    if (m.intraGbs != fabric.gpuCopyGbs / kFabricRanks)
      problems += " fabric " + std::to_string(m.intraGbs) + " GB/s, want the copy rate " +
                  std::to_string(fabric.gpuCopyGbs) + " over " + std::to_string(kFabricRanks) + " ranks;";
    if (fabric.maxChannels <= 2) problems += " only " + std::to_string(fabric.maxChannels) + " device channels;";
    // The FIFOs' layout is the one the device tuner prices and the cost model's default device machine
    // for such a job assumes (device/fifo_layout.h: 8 slots of 512 KiB for 2 ranks on one host).
    if (m.fifoSlots != fabric.fifoSlots)
      problems += " the tuner prices " + std::to_string(m.fifoSlots) + " slots, the FIFOs have " +
                  std::to_string(fabric.fifoSlots) + ";";
    loom::model::JobModelOptions modelled;
    modelled.world = kFabricRanks;
    modelled.topology = "none";
    modelled.memory = loom::model::MemoryChoice::Device;
    std::unique_ptr<loom::model::JobModel> model;
    loom::MachineModel modelMachine;
    if (!loom::model::JobModel::create(modelled, &model).ok() || !model->machineOf({}, true, &modelMachine).ok()) {
      problems += " no cost model;";
    } else if (model->slotBytes() != fabric.slotBytes || modelMachine.fifoSlots != fabric.fifoSlots ||
               fabric.fifoSlots != 8 || fabric.slotBytes != (512u << 10)) {
      problems += " the model's device FIFOs (" + std::to_string(modelMachine.fifoSlots) + " x " +
                  std::to_string(model->slotBytes()) + " bytes) are not the communicator's (" +
                  std::to_string(fabric.fifoSlots) + " x " + std::to_string(fabric.slotBytes) + ", want 8 x 512 KiB);";
    }
    // Rank threads of one GPU: peer-memory plans can run, and the tuner knows it unless they are off.
    if (fabric.peerMemory != wantPeerMemory || m.peerMemory != wantPeerMemory)
      problems += std::string(" peer memory: the setup says ") + (fabric.peerMemory ? "yes" : "no") + ", the tuner's machine " +
                  (m.peerMemory ? "yes" : "no") + ", want " + (wantPeerMemory ? "yes" : "no (LOOM_DEVICE_PEER_MEMORY=0)") + ";";
    loom::Algorithm lastAlgo{};
    auto channelsFor = [&](size_t count) {
      loom::Operation op;
      op.comm = ctx.comm;
      op.count = count;
      loom::PlanRequest req;
      std::string note;
      const loom::Status chosen = loom::chooseTunedPlan(ctx.comm, op, loom::PlanFor::Device, &lastAlgo, &req, &note);
      return chosen.ok() ? req.nchannels : -1;
    };
    auto isPeer = [&] { return lastAlgo == loom::Algorithm::PeerMemory || lastAlgo == loom::Algorithm::PeerOneShot; };
    for (size_t count : {size_t{2}, size_t{1} << 28}) {
      channelsFor(count);
      // On ranks sharing a GPU's copy rate the model has the peer-memory plans win at every size.
      if (isPeer() != wantPeerMemory)
        problems += " a " + std::to_string(count * 4) + "-byte all-reduce is tuned to " + loom::algorithmName(lastAlgo) + ";";
    }
    // Many channels pay only where the fabric is many lanes wide (800 GB/s here; FakeCuda's own copy
    // rate, a host memcpy, is about one lane's).
    const int small = channelsFor(2), large = channelsFor(size_t{1} << 28);
    if (small != 1) problems += " an 8-byte all-reduce gets " + std::to_string(small) + " channels;";
    if (wantCopyGbs > 0 && (large <= 2 || large > fabric.maxChannels))
      problems += " a 1 GiB all-reduce gets " + std::to_string(large) + " channels of " +
                  std::to_string(fabric.maxChannels) + ";";
  }
  problems += send.checkGuards("send") + recv.checkGuards("recv");
  if (std::string met = meetOnTheHost(ctx); !met.empty()) problems += met;  // before the buffers go
  return problems;
}

TEST(DeviceFabric, RanksSharingAGpuPriceItsMeasuredCopyRate) {
  loomtest::RunOptions run;
  run.timeoutSec = 120;
  EXPECT_EQ(loomtest::runRanks(loomtest::Launch::Threads, kFabricRanks, run,
                               [](loomtest::RankContext& ctx) {
                                 return withStreamOnGpu0(ctx, [](loomtest::RankContext& c, cudaStream_t s) { return checkFabric(c, s, 0, false); });
                               }),
            "");
}

TEST(DeviceFabric, TheCopyRateASettingGives) {
  setenv("LOOM_GPU_COPY_GBS", "800", 1);
  loomtest::RunOptions run;
  run.timeoutSec = 120;
  EXPECT_EQ(loomtest::runRanks(loomtest::Launch::Threads, kFabricRanks, run,
                               [](loomtest::RankContext& ctx) {
                                 return withStreamOnGpu0(ctx, [](loomtest::RankContext& c, cudaStream_t s) { return checkFabric(c, s, 800, false); });
                               }),
            "");
  unsetenv("LOOM_GPU_COPY_GBS");
}

// LOOM_DEVICE_PEER_MEMORY=1 (the default; this test suite runs with 0): the setup finds every rank a
// thread of this process on GPU 0, the device tuner's machine says so, and it takes peer-memory plans.
TEST(DeviceFabric, PeerMemoryPlansWhereEveryRankSharesTheGpu) {
  const char* before = std::getenv("LOOM_DEVICE_PEER_MEMORY");
  const std::string saved = before ? before : "";
  setenv("LOOM_DEVICE_PEER_MEMORY", "1", 1);
  setenv("LOOM_GPU_COPY_GBS", "800", 1);
  loomtest::RunOptions run;
  run.timeoutSec = 120;
  EXPECT_EQ(loomtest::runRanks(loomtest::Launch::Threads, kFabricRanks, run,
                               [](loomtest::RankContext& ctx) {
                                 return withStreamOnGpu0(ctx, [](loomtest::RankContext& c, cudaStream_t s) { return checkFabric(c, s, 800, true); });
                               }),
            "");
  unsetenv("LOOM_GPU_COPY_GBS");
  if (before) setenv("LOOM_DEVICE_PEER_MEMORY", saved.c_str(), 1); else unsetenv("LOOM_DEVICE_PEER_MEMORY");
}

}  // namespace
}  // namespace loomgpu
