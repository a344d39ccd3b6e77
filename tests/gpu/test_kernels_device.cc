// The CUDA reduce/copy kernels on the GPU (kernels/cuda/cuda_reduce.h) against the CPU kernels for
// every dtype x op x post-op, aligned and misaligned, in place: bit for bit (float32/float64 NaN
// payloads excepted, see kernel_cases.h). Skips without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>

#include "base/datatype.h"
#include "gpu_support.h"
#include "kernel_cases.h"
#include "kernels/cuda/cuda_reduce.h"

namespace loomgpu {
namespace {

struct DeviceAccess {
  std::vector<void*> blocks;
  BufferAccess access() {
    BufferAccess a;
    a.place = [this](const std::vector<uint8_t>& image) {
      void* p = nullptr;
      cudaCheck(cudaMalloc(&p, image.size() + 256), "cudaMalloc");
      cudaCheck(cudaMemcpy(p, image.data(), image.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
      blocks.push_back(p);
      return p;
    };
    a.fetch = [](const void* p, size_t bytes) {
      std::vector<uint8_t> v(bytes);
      cudaCheck(cudaMemcpy(v.data(), p, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
      return v;
    };
    a.freeAll = [this] {
      for (void* p : blocks) cudaFree(p);
      blocks.clear();
    };
    return a;
  }
};

std::string runOnDevice(const KernelCase& c, const void* a, const void* b, void* dst, cudaStream_t stream) {
  auto s = reinterpret_cast<loom::cuda::Stream>(stream);
  int err = c.copy ? loom::cuda::copyArrayAsync(dst, a, c.count, c.dtype, c.op, c.finalize, s)
                   : loom::cuda::reduceArraysAsync(dst, a, b, c.count, c.dtype, c.op, c.finalize, s);
  if (err == 0) err = cudaStreamSynchronize(stream);
  if (err == 0) return "";
  return std::string("CUDA error ") + cudaGetErrorName(static_cast<cudaError_t>(err));
}

class DeviceKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    LOOM_REQUIRE_GPU();
    cudaCheck(cudaSetDevice(0), "cudaSetDevice");
    cudaCheck(cudaStreamCreate(&stream_), "cudaStreamCreate");
  }
  void TearDown() override {
    if (stream_) cudaStreamDestroy(stream_);
  }
  cudaStream_t stream_ = nullptr;
};

TEST_F(DeviceKernels, MatchCpuKernelsBitForBit) {
  DeviceAccess device;
  std::string failures = checkAgainstCpu(kernelCases(), device.access(),
                                         [&](const KernelCase& c, const void* a, const void* b, void* dst) {
                                           return runOnDevice(c, a, b, dst, stream_);
                                         });
  EXPECT_EQ(failures, "");
}

// Large arrays use the capped, grid-stride launch: every element once, none twice.
TEST_F(DeviceKernels, LargeSumInPlace) {
  const size_t n = (size_t{64} << 20) + 3;
  std::vector<float> host(n, 1.0f);
  float* d = nullptr;
  cudaCheck(cudaMalloc(reinterpret_cast<void**>(&d), n * sizeof(float)), "cudaMalloc");
  cudaCheck(cudaMemcpy(d, host.data(), n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  loom::ReduceOp op;
  ASSERT_EQ(loom::cuda::reduceArraysAsync(d, d, d, n, loomFloat32, op, true, reinterpret_cast<loom::cuda::Stream>(stream_)), 0);
  cudaCheck(cudaMemcpy(host.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
  cudaFree(d);
  size_t bad = 0;
  for (float v : host) bad += v != 2.0f;
  EXPECT_EQ(bad, 0u);
}

}  // namespace
}  // namespace loomgpu
