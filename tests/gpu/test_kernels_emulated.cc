// The CUDA kernels' own code (src/kernels/cuda/element_ops.cuh: arithmetic, conversions through
// cuda_fp16/bf16/fp8.h, vector/head/tail split, grid-stride loop) run on the host as GPU threads
// would split it, against the CPU kernels, bit for bit. Needs no GPU: this runs everywhere, and is
// the evidence for the kernels' semantics on machines without one. (What it cannot show: the device
// conversion instructions themselves, and real concurrency; test_kernels_device.cc covers those.)
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "base/datatype.h"
#include "kernel_cases.h"
#include "kernels/cuda/element_ops.cuh"

namespace loomgpu {
namespace {

struct HostAccess {
  std::vector<void*> blocks;
  BufferAccess access() {
    BufferAccess a;
    a.place = [this](const std::vector<uint8_t>& image) {
      void* p = std::aligned_alloc(256, (image.size() + 255) / 256 * 256 + 256);
      std::memcpy(p, image.data(), image.size());
      blocks.push_back(p);
      return p;
    };
    a.fetch = [](const void* p, size_t bytes) {
      auto* c = static_cast<const uint8_t*>(p);
      return std::vector<uint8_t>(c, c + bytes);
    };
    a.freeAll = [this] {
      for (void* p : blocks) std::free(p);
      blocks.clear();
    };
    return a;
  }
};

std::string emulate(const KernelCase& c, const void* a, const void* b, void* dst, size_t nthreads) {
  const size_t es = loom::dataTypeSize(c.dtype);
  loom::cuda::ElementwiseArgs args = loom::cuda::makeArgs(dst, a, c.copy ? nullptr : b, c.count, es, c.op, c.finalize);
  // A plain copy is cudaMemcpyAsync in the library; emulate it as a copy kernel with no post-op.
  if (c.copy && !c.finalize) args.post = loom::PostOpKind::None;
  const bool known = loom::cuda::withElem(c.dtype, [&](auto elem) {
    loom::cuda::emulateElementwise<decltype(elem)>(args, nthreads);
  });
  return known ? "" : "unknown dtype";
}

class EmulatedKernels : public ::testing::TestWithParam<size_t> {};

TEST_P(EmulatedKernels, MatchCpuKernelsBitForBit) {
  HostAccess host;
  const size_t nthreads = GetParam();
  std::string failures = checkAgainstCpu(kernelCases(), host.access(),
                                         [&](const KernelCase& c, const void* a, const void* b, void* dst) {
                                           return emulate(c, a, b, dst, nthreads);
                                         });
  EXPECT_EQ(failures, "");
}

// 1 thread does everything; 3 and 64 split vectors and edges between threads; 4096 leaves most idle.
INSTANTIATE_TEST_SUITE_P(Threads, EmulatedKernels, ::testing::Values(1, 3, 64, 4096),
                         [](const ::testing::TestParamInfo<size_t>& info) { return "t" + std::to_string(info.param); });

// The head/vector/tail split itself.
TEST(EmulatedKernels, VectorPlan) {
  alignas(16) static uint8_t buf[256];
  loom::cuda::ElementwiseArgs args;
  args.dst = buf, args.a = buf + 32, args.b = buf + 64, args.count = 100;
  loom::cuda::planVectors(&args, 4);
  EXPECT_EQ(args.head, 0u);
  EXPECT_EQ(args.vectors, 25u);
  args.dst = buf + 4, args.a = buf + 36, args.b = buf + 68;
  loom::cuda::planVectors(&args, 4);
  EXPECT_EQ(args.head, 3u);
  EXPECT_EQ(args.vectors, 24u);  // 97 elements after the head: 24 vectors and 1 tail element
  args.b = buf + 72;             // misaligned differently: element by element
  loom::cuda::planVectors(&args, 4);
  EXPECT_EQ(args.head, 100u);
  EXPECT_EQ(args.vectors, 0u);
  args.dst = buf + 12, args.a = buf + 44, args.b = nullptr, args.count = 1;
  loom::cuda::planVectors(&args, 4);  // fewer elements than the head
  EXPECT_EQ(args.head, 1u);
  EXPECT_EQ(args.vectors, 0u);
}

}  // namespace
}  // namespace loomgpu
