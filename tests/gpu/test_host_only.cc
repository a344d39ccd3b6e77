// A CUDA build on a machine without a GPU or driver (and the parts of the CUDA build that need none):
// CUDA is found unusable once, every pointer is host memory, CUDA entry points fail cleanly instead of
// crashing, and collectives on host memory run as before. With a GPU, the memory kinds of device,
// managed and pinned allocations are checked instead.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "core/device_staging.h"
#include "gpu_support.h"
#include "kernels/cuda/cuda_reduce.h"
#include "kernels/cuda/memory_kind.h"
#include "kernels/cuda/pinned_pool.h"
#include "loom.h"

namespace loomgpu {
namespace {

using loom::cuda::MemoryKind;

TEST(HostOnly, HostPointersAreHostMemory) {
  std::vector<float> v(16);
  int onStack = 0;
  EXPECT_EQ(loom::cuda::queryMemory(v.data()).kind, MemoryKind::Host);
  EXPECT_EQ(loom::cuda::queryMemory(&onStack).kind, MemoryKind::Host);
  EXPECT_EQ(loom::cuda::queryMemory(nullptr).kind, MemoryKind::Host);
  EXPECT_FALSE(loom::cuda::isDeviceMemory(v.data()));
  EXPECT_FALSE(loom::cuda::coveredByPeerAccess(v.data()));
  EXPECT_FALSE(loom::cuda::coveredByPeerAccess(nullptr));
}

TEST(HostOnly, AvailabilityAgreesWithTheProbe) {
  const GpuProbe& probe = probeGpu();
  EXPECT_EQ(loom::cuda::cudaUsable(), probe.devices > 0) << loom::cuda::unusableReason();
  EXPECT_EQ(loom::cuda::deviceCount(), probe.devices);
  if (probe.devices == 0) {
    EXPECT_FALSE(loom::cuda::unusableReason().empty());
    std::printf("CUDA unusable here, as expected: %s\n", loom::cuda::unusableReason().c_str());
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
  loom::cuda::PinnedBlock block;
  loom::Status st = block.acquire(1 << 20);
  EXPECT_EQ(st.code(), loomUnhandledCudaError) << st.message();
  EXPECT_EQ(block.data(), nullptr);
}

TEST(HostOnly, DeviceListsNeedAGpu) {
  const int devlist[2] = {0, 0};
  loom::Status st = loom::checkDeviceList(2, devlist);
  if (probeGpu().devices == 0) {
    EXPECT_EQ(st.code(), loomInvalidArgument);
  } else {
    EXPECT_TRUE(st.ok()) << st.message();  // two ranks on GPU 0 are allowed
    const int bad[1] = {probeGpu().devices};
    EXPECT_EQ(loom::checkDeviceList(1, bad).code(), loomInvalidArgument);
  }
}

TEST(HostOnly, HostScalarsStayWhereTheyAre) {
  const double scalar = 2.5;
  const void* p = &scalar;
  alignas(8) unsigned char storage[8];
  ASSERT_TRUE(loom::readScalarToHost(&p, loomFloat64, storage, nullptr).ok());
  EXPECT_EQ(p, &scalar);
}

// The staging hook hands host-only operations to the host path untouched.
std::vector<loom::Operation> gSeen;
loom::Status recordOps(const std::vector<loom::Operation>& ops) {
  gSeen = ops;
  return loom::Status::Ok();
}

TEST(HostOnly, StagingPassesHostOperationsThrough) {
  float send[8] = {}, recv[8] = {};
  loom::Operation op;
  op.send = send;
  op.recv = recv;
  op.count = 8;
  ASSERT_TRUE(loom::runWithDeviceStaging({op}, recordOps).ok());
  ASSERT_EQ(gSeen.size(), 1u);
  EXPECT_EQ(gSeen[0].send, send);
  EXPECT_EQ(gSeen[0].recv, recv);
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
  EXPECT_EQ(loom::cuda::queryMemory(dev).kind, MemoryKind::Device);
  EXPECT_EQ(loom::cuda::queryMemory(static_cast<char*>(dev) + 100).kind, MemoryKind::Device);
  EXPECT_EQ(loom::cuda::queryMemory(dev).device, 0);
  EXPECT_EQ(loom::cuda::queryMemory(managed).kind, MemoryKind::Managed);
  EXPECT_EQ(loom::cuda::queryMemory(pinned).kind, MemoryKind::Host);
  // What direct mode may let another GPU of this process write into: cudaMalloc's, not a stream pool's.
  void* pooled = nullptr;
  cudaCheck(cudaMallocAsync(&pooled, 4096, nullptr), "cudaMallocAsync");
  cudaCheck(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize");
  EXPECT_TRUE(loom::cuda::coveredByPeerAccess(dev));
  EXPECT_TRUE(loom::cuda::coveredByPeerAccess(static_cast<char*>(dev) + 100));
  EXPECT_FALSE(loom::cuda::coveredByPeerAccess(pooled));
  EXPECT_FALSE(loom::cuda::coveredByPeerAccess(pinned));
  cudaFreeAsync(pooled, nullptr);
  cudaFree(dev);
  cudaFree(managed);
  cudaFreeHost(pinned);
}

TEST(WithGpu, PinnedPoolReusesBlocks) {
  LOOM_REQUIRE_GPU();
  char* first = nullptr;
  {
    loom::cuda::PinnedBlock a;
    ASSERT_TRUE(a.acquire(100000).ok());
    first = a.data();
    EXPECT_GE(a.capacity(), 100000u);
  }
  loom::cuda::PinnedBlock b;
  ASSERT_TRUE(b.acquire(100000).ok());
  EXPECT_EQ(b.data(), first);
  b.release();
  loom::cuda::trimPinnedPool();
  EXPECT_EQ(loom::cuda::pinnedPoolCachedBytes(), 0u);
}

}  // namespace
}  // namespace loomgpu
