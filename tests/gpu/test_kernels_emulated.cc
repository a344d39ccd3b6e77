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

// Runs the case as the kernels do; with a second destination (the plan kernel's reduce-and-forward:
// ElementwiseArgs::dst2, at dst's phase within 16-byte vectors) every other run, which must then hold
// what dst holds, byte for byte.
std::string emulate(const KernelCase& c, const void* a, const void* b, void* dst, size_t nthreads) {
  const size_t es = loom::dataTypeSize(c.dtype);
  loom::cuda::ElementwiseArgs args = loom::cuda::makeArgs(dst, a, c.copy ? nullptr : b, c.count, es, c.op, c.finalize);
  // A plain copy is cudaMemcpyAsync in the library; emulate it as a copy kernel with no post-op.
  if (c.copy && !c.finalize) args.post = loom::PostOpKind::None;
  static size_t runs = 0;
  const bool forward = ++runs % 2 == 0;
  std::vector<uint8_t> second(c.count * es + 2 * loom::cuda::kVectorBytes);
  uint8_t* dst2 = second.data();
  if (forward) {
    const uintptr_t phase = reinterpret_cast<uintptr_t>(dst) % loom::cuda::kVectorBytes;
    while (reinterpret_cast<uintptr_t>(dst2) % loom::cuda::kVectorBytes != phase) ++dst2;
    args.dst2 = dst2;
    loom::cuda::planVectors(&args, es);
  }
  const bool known = loom::cuda::withElem(c.dtype, [&](auto elem) {
    loom::cuda::emulateElementwise<decltype(elem)>(args, nthreads);
  });
  if (!known) return "unknown dtype";
  if (forward && c.count > 0 && std::memcmp(dst, dst2, c.count * es) != 0) return "dst2 differs from dst";
  return "";
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
  args.b = buf + 68, args.dst2 = buf + 132;  // a second destination at dst's phase keeps the vectors
  loom::cuda::planVectors(&args, 4);
  EXPECT_EQ(args.head, 3u);
  EXPECT_EQ(args.vectors, 24u);
  args.dst2 = buf + 136;  // at another phase: element by element
  loom::cuda::planVectors(&args, 4);
  EXPECT_EQ(args.head, 100u);
  EXPECT_EQ(args.vectors, 0u);
  args.dst2 = nullptr;
  args.dst = buf + 12, args.a = buf + 44, args.b = nullptr, args.count = 1;
  loom::cuda::planVectors(&args, 4);  // fewer elements than the head
  EXPECT_EQ(args.head, 1u);
  EXPECT_EQ(args.vectors, 0u);
}

}  // namespace
}  // namespace loomgpu
