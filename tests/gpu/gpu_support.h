// What the GPU tests share: whether a GPU is there (asked in a forked child, so that this process
// never initializes CUDA before it forks rank processes), device buffers with guard bytes, and the
// skip macro. Without a GPU every GPU test skips with the reason.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace loomgpu {

struct GpuProbe {
  int devices = 0;
  std::string reason;  // why there is none, when devices == 0
  // An NVIDIA driver is installed (its device nodes or libcuda.so.1) yet CUDA finds no device: a
  // driver/runtime mismatch or a broken install, which fails the GPU tests instead of skipping them.
  bool broken = false;
};
// Probed once per process, in a child process.
const GpuProbe& probeGpu();

// Device memory with kGuardBytes of a known pattern on both sides of the data region. Every method
// makes CUDA calls on the current device; failures throw std::runtime_error.
//
// Ranks that are threads running plan kernels on one GPU must not allocate or free device memory
// between their launches (cudaFree synchronizes the device, and a peer's kernel may already wait
// for a launch of theirs that comes only after it): such tests allocate each buffer once, at the
// largest size, and prepare() it anew for each case.
class DeviceBuffer {
 public:
  static constexpr size_t kGuardBytes = 256;
  DeviceBuffer(size_t bytes, uint64_t junkSeed);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // Uses the first `bytes` of the allocation (at most its capacity) for the next case: junk data from
  // `junkSeed` between fresh guards. No allocation.
  void prepare(size_t bytes, uint64_t junkSeed);
  uint8_t* data() const { return base_ + kGuardBytes; }
  size_t size() const { return bytes_; }
  void upload(const void* host, size_t bytes, size_t offset = 0);
  std::vector<uint8_t> download() const;
  // "" when both guards hold their pattern.
  std::string checkGuards(const std::string& name) const;

 private:
  size_t capacity_;
  size_t bytes_ = 0;
  uint8_t* base_ = nullptr;
};

// Throws std::runtime_error naming the call when a CUDA runtime call fails.
void cudaCheck(int error, const char* what);

// How test_collectives_device.cc's ranks run, chosen when the binary starts (LOOM_TEST_GPU_MODE), so
// that the source is compiled once for the CUDA runtime and once for FakeCuda:
//   threads    rank threads, staged through pinned host memory (the default)
//   processes  forked rank processes, staged in stream order
//   plans      rank threads as plan kernels (tests/gpu/meson.build also sets LOOM_DEVICE_PLANS=require)
//   hosts      rank processes that each say they are on a host of their own (LOOM_HOSTID), so that plan
//              kernels reach each other through network lanes
//   process-plans  rank processes on one GPU as plan kernels, their FIFOs mapped through CUDA IPC (the
//              meson test sets LOOM_DEVICE_PLANS=require; on a GPU their kernels run side by side only
//              under MPS)
enum class GpuMode { Threads, Processes, Plans, Hosts, ProcessPlans };
GpuMode gpuMode();

}  // namespace loomgpu

#define LOOM_REQUIRE_GPU()                                                                     \
  do {                                                                                         \
    const ::loomgpu::GpuProbe& loom_probe_ = ::loomgpu::probeGpu();                            \
    if (loom_probe_.broken) GTEST_FAIL() << "a GPU driver is installed, but " << loom_probe_.reason; \
    if (loom_probe_.devices < 1) GTEST_SKIP() << "no CUDA device: " << loom_probe_.reason;     \
  } while (0)
