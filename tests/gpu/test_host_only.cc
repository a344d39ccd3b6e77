// A CUDA build on a machine without a GPU or driver (and the parts of the CUDA build that need none):
// CUDA is found unusable once, every pointer is host memory, CUDA entry points fail cleanly instead of
// crashing, and collectives on host memory run as before. With a GPU, the memory kinds of device,
// managed and pinned allocations are checked instead.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "device/device_layer.h"
#include "device/memory_kind.h"
#include "device/pinned_pool.h"
#include "gpu_support.h"
#include "kernels/cuda/cuda_reduce.h"
#include "loom.h"

namespace loomgpu {
namespace {

using loom::device::MemoryKind;

TEST(HostOnly, HostPointersAreHostMemory) {
  std::vector<float> v(16);
  int onStack = 0;
  EXPECT_EQ(loom::device::queryMemory(v.data()).kind, MemoryKind::Host);
  EXPECT_EQ(loom::device::queryMemory(&onStack).kind, MemoryKind::Host);
  EXPECT_EQ(loom::device::queryMemory(nullptr).kind, MemoryKind::Host);
  EXPECT_FALSE(loom::device::isDeviceMemory(v.data()));
  EXPECT_FALSE(loom::device::coveredByPeerAccess(v.data()));
  EXPECT_FALSE(loom::device::coveredByPeerAccess(nullptr));
}

TEST(HostOnly, AvailabilityAgreesWithTheProbe) {
  const GpuProbe& probe = probeGpu();
  EXPECT_EQ(loom::device::cudaUsable(), probe.devices > 0) << loom::device::unusableReason();
  EXPECT_EQ(loom::device::deviceCount(), probe.devices);
  if (probe.devices == 0) {
    EXPECT_FALSE(loom::device::unusableReason().empty());
    std::printf("CUDA unusable here, as expected: %s\n", loom::device::unusableReason().c_str());
  }
  int kinds = 0;
  ASSERT_EQ(loomGetMemoryKinds(&kinds), loomSuccess);
  EXPECT_EQ(kinds, LOOM_MEMORY_HOST | (probe.devices > 0 ? LOOM_MEMORY_CUDA : 0));
}

TEST(HostOnly, CudaEntryPointsFailCleanlyWithoutADevice) {
  if (probeGpu().devices > 0) GTEST_SKIP() << "a GPU is present; this checks the GPU-less behaviour";
  float a[4] = {1, 2, 3, 4}, b[4] = {1, 1, 1, 1};
  loom::ReduceOp op;
  EXPECT_NE(loom::cuda::reduceArraysAsync(a, a, b, 4, loomFloat32, op, true, nullptr), 0);
  loom::device::PinnedBlock block;
  loom::Status st = block.acquire(1 << 20);
  EXPECT_EQ(st.code(), loomUnhandledCudaError) << st.message();
  EXPECT_EQ(block.data(), nullptr);
}

// Every CUDA call's result passes through cudaStatus: success must be Ok (a setup, launch or staging
// step that checks `if (st.ok())` after a successful call would otherwise refuse itself).
TEST(HostOnly, CudaResultsBecomeStatuses) {
  EXPECT_TRUE(loom::device::cudaStatus(cudaSuccess, "cudaSetDevice").ok());
  const loom::Status failed = loom::device::cudaStatus(cudaErrorInvalidValue, "cudaMemcpyAsync");
  EXPECT_EQ(failed.code(), loomUnhandledCudaError);
  EXPECT_NE(failed.message().find("cudaMemcpyAsync: cudaErrorInvalidValue"), std::string::npos) << failed.message();
}

TEST(HostOnly, DeviceListsNeedAGpu) {
  const int devlist[2] = {0, 0};
  loom::Status st = loom::device::checkDeviceList(2, devlist);
  if (probeGpu().devices == 0) {
    EXPECT_EQ(st.code(), loomInvalidArgument);
  } else {
    EXPECT_TRUE(st.ok()) << st.message();  // two ranks on GPU 0 are allowed
    const int bad[1] = {probeGpu().devices};
    EXPECT_EQ(loom::device::checkDeviceList(1, bad).code(), loomInvalidArgument);
  }
}

TEST(HostOnly, HostScalarsStayWhereTheyAre) {
  const double scalar = 2.5;
  const void* p = &scalar;
  alignas(8) unsigned char storage[8];
  ASSERT_TRUE(loom::device::readScalarInStreamOrder(&p, loomFloat64, storage, nullptr).ok());
  EXPECT_EQ(p, &scalar);
}

// Routing (core/run/group.cc) asks the device layer where buffers are: host memory is host memory, and
// nothing about it would go to staging or a plan kernel.
TEST(HostOnly, HostBuffersArePlacedOnTheHost) {
  float send[8] = {}, recv[8] = {};
  const loom::device::Placement where = loom::device::placementOf(send, sizeof send, recv, sizeof recv);
  EXPECT_FALSE(where.touchesCuda());
  EXPECT_EQ(where.kernelGpu, -1);
  EXPECT_EQ(where.send.kind, MemoryKind::Host);
  EXPECT_EQ(where.recv.kind, MemoryKind::Host);
  const loom::device::Placement none = loom::device::placementOf(nullptr, 0, nullptr, 0);
  EXPECT_FALSE(none.touchesCuda());
  EXPECT_EQ(none.kernelGpu, -1);
}

// The host suites cover host collectives in depth; this is the smoke test inside the GPU suite.
TEST(HostOnly, HostAllReduceInACudaBuild) {
  constexpr int kRanks = 3;
  loomComm_t comms[kRanks];
  ASSERT_EQ(loomCommInitAll(comms, kRanks, nullptr), loomSuccess);
  std::vector<std::thread> threads;
  std::vector<std::vector<int>> data(kRanks, std::vector<int>(1000));
  std::vector<loomResult_t> results(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    for (int i = 0; i < 1000; ++i) data[r][i] = r + i;
    threads.emplace_back([&, r] {
      results[r] = loomAllReduce(data[r].data(), data[r].data(), 1000, loomInt32, loomSum, comms[r], nullptr);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(results[r], loomSuccess);
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(data[r][i], 3 * i + 3) << "rank " << r << " element " << i;
    loomCommDestroy(comms[r]);
  }
}

TEST(WithGpu, MemoryKindsOfCudaAllocations) {
  LOOM_REQUIRE_GPU();
  void *dev = nullptr, *managed = nullptr, *pinned = nullptr;
  cudaCheck(cudaSetDevice(0), "cudaSetDevice");
  cudaCheck(cudaMalloc(&dev, 4096), "cudaMalloc");
  cudaCheck(cudaMallocManaged(&managed, 4096), "cudaMallocManaged");
  cudaCheck(cudaMallocHost(&pinned, 4096), "cudaMallocHost");
  EXPECT_EQ(loom::device::queryMemory(dev).kind, MemoryKind::Device);
  EXPECT_EQ(loom::device::queryMemory(static_cast<char*>(dev) + 100).kind, MemoryKind::Device);
  EXPECT_EQ(loom::device::queryMemory(dev).device, 0);
  EXPECT_EQ(loom::device::queryMemory(managed).kind, MemoryKind::Managed);
  EXPECT_EQ(loom::device::queryMemory(pinned).kind, MemoryKind::Host);
  // What direct mode may let another GPU of this process write into: cudaMalloc's, not a stream pool's.
  void* pooled = nullptr;
  cudaCheck(cudaMallocAsync(&pooled, 4096, nullptr), "cudaMallocAsync");
  cudaCheck(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize");
  EXPECT_TRUE(loom::device::coveredByPeerAccess(dev));
  EXPECT_TRUE(loom::device::coveredByPeerAccess(static_cast<char*>(dev) + 100));
  EXPECT_FALSE(loom::device::coveredByPeerAccess(pooled));
  EXPECT_FALSE(loom::device::coveredByPeerAccess(pinned));
  cudaFreeAsync(pooled, nullptr);
  cudaFree(dev);
  cudaFree(managed);
  cudaFreeHost(pinned);
}

TEST(WithGpu, PinnedPoolReusesBlocks) {
  LOOM_REQUIRE_GPU();
  char* first = nullptr;
  {
    loom::device::PinnedBlock a;
    ASSERT_TRUE(a.acquire(100000).ok());
    first = a.data();
    EXPECT_GE(a.capacity(), 100000u);
  }
  loom::device::PinnedBlock b;
  ASSERT_TRUE(b.acquire(100000).ok());
  EXPECT_EQ(b.data(), first);
  b.release();
  loom::device::trimPinnedPool();
  EXPECT_EQ(loom::device::pinnedPoolCachedBytes(), 0u);
}

// A cached block serves smaller requests down to a sixteenth of its size (the plan kernels' setup
// warms the pool so that the first launches need no cudaHostAlloc), not a request far smaller.
TEST(WithGpu, PinnedPoolServesSmallerRequestsFromLargerBlocks) {
  LOOM_REQUIRE_GPU();
  loom::device::trimPinnedPool();
  char* large = nullptr;
  {
    loom::device::PinnedBlock a;
    ASSERT_TRUE(a.acquire(size_t{1} << 20).ok());
    large = a.data();
  }
  {
    loom::device::PinnedBlock b;
    ASSERT_TRUE(b.acquire(size_t{100} << 10).ok());  // the 128 KiB class: 1 MiB is 8 times that
    EXPECT_EQ(b.data(), large);
  }
  loom::device::PinnedBlock c;
  ASSERT_TRUE(c.acquire(1000).ok());  // the 64 KiB class: 1 MiB is 16 times that
  EXPECT_EQ(c.data(), large);
  c.release();
  {
    loom::device::PinnedBlock huge;
    ASSERT_TRUE(huge.acquire(size_t{4} << 20).ok());
  }
  loom::device::PinnedBlock d;
  ASSERT_TRUE(d.acquire(1000).ok());  // served by the 1 MiB block again, never by the 4 MiB one
  EXPECT_EQ(d.data(), large);
  d.release();
  loom::device::trimPinnedPool();
}

}  // namespace
}  // namespace loomgpu
