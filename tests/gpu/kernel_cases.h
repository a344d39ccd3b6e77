// Cases for the CUDA reduce/copy kernels, checked bit for bit against the CPU kernels
// (kernels/cpu/reduce.h): every dtype x every operator and post-operation, finalize on and off,
// counts around the 16-byte vector width, aligned, equally misaligned and differently misaligned
// pointers, in place. Inputs are random bit patterns (NaN, infinities and subnormals included).
// The one tolerance: a float32/float64 NaN matches any NaN (GPUs return the canonical NaN from
// arithmetic where x86 keeps an operand's payload); narrow floats are compared exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cpu/reduce.h"

namespace loomgpu {

struct KernelCase {
  loomDataType_t dtype = loomFloat32;
  loom::ReduceOp op;
  bool finalize = false;
  bool copy = false;     // copyArray instead of reduceArrays (b unused)
  bool inPlace = false;  // dst == a
  size_t count = 0;
  size_t offsetA = 0, offsetB = 0, offsetDst = 0;  // in elements from 256-byte aligned bases
  uint64_t seed = 0;
};

std::vector<KernelCase> kernelCases();
std::string describe(const KernelCase& c);

// Runs the kernel under test: a, b, dst point into buffers laid out as the case says (dst == a in
// place; b null for copies). Returns "" or an error message.
using KernelUnderTest = std::function<std::string(const KernelCase& c, const void* a, const void* b, void* dst)>;

// How the buffers reach the kernel: host memory for the emulation, device memory for the GPU. The
// harness hands host images in and expects the dst image back.
struct BufferAccess {
  // Makes `bytes` of kernel-visible memory holding `image`; returns its address.
  std::function<void*(const std::vector<uint8_t>& image)> place;
  // Reads `bytes` at `p` back into host memory.
  std::function<std::vector<uint8_t>(const void* p, size_t bytes)> fetch;
  // Frees everything placed so far.
  std::function<void()> freeAll;
};

// Runs every case through `kernel` and the CPU kernels; returns "" or the first few mismatches.
std::string checkAgainstCpu(const std::vector<KernelCase>& cases, const BufferAccess& access,
                            const KernelUnderTest& kernel);

}  // namespace loomgpu
