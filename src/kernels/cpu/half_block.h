// Half <-> float conversion of whole blocks for the reduce kernels. x86's F16C converts eight values per
// instruction, about ten times the branchless integer code, so it is used whenever the CPU has it;
// both paths give identical bits (NaN included), so which one runs never shows in results.
#pragma once

#include <cstddef>
#include <cstdint>

namespace loom::cpu {

void halfToFloatBlock(const uint16_t* src, float* out, size_t count);
void floatToHalfBlock(const float* in, uint16_t* dst, size_t count);

// The two implementations, for tests that compare them. The F16C ones need cpuHasF16c().
bool cpuHasF16c();
void halfToFloatBlockPortable(const uint16_t* src, float* out, size_t count);
void floatToHalfBlockPortable(const float* in, uint16_t* dst, size_t count);
void halfToFloatBlockF16c(const uint16_t* src, float* out, size_t count);
void floatToHalfBlockF16c(const float* in, uint16_t* dst, size_t count);

}  // namespace loom::cpu
