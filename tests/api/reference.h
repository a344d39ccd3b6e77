// The tests' own model of Loom's reductions, written independently of the library: deterministic
// inputs per (case, rank, index), the expected results, and the byte patterns of data movement.
//
// Inputs are chosen so that every reduction is exact in every dtype whatever order or tree the
// library reduces in: integers wrap modulo 2^bits (sum/prod/premulsum are then order-independent);
// floats are small multiples of a power of two whose partial sums stay exactly representable
// (the bound depends on the dtype's precision and on nranks); prod uses {±1, ±2, ±0.5}. The one
// inexact case is Avg on floats with nranks not a power of two (see the tolerance in reference.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "dtypes.h"
#include "loom.h"

namespace loomtest {

// The tests' reduction operators: the five built-ins plus PreMulSum (made per case with
// loomRedOpCreatePreMulSum).
enum class Op { Sum, Prod, Max, Min, Avg, PreMulSum };
inline constexpr Op kAllOps[] = {Op::Sum, Op::Prod, Op::Max, Op::Min, Op::Avg, Op::PreMulSum};

const char* opName(Op op);
// The built-in loomRedOp_t for op (not for PreMulSum).
loomRedOp_t builtinOp(Op op);

// ---- Reduction inputs and results --------------------------------------------------------------
// The PreMulSum scalar for dtype, one element written to out: -3 (signed), 3 (unsigned), 0.5 (floats).
void preMulScalar(loomDataType_t dtype, void* out);

struct ReduceInputs {
  loomDataType_t dtype;
  Op op;
  int nranks;
  uint64_t seed;  // differs per case, so stale data from an earlier case never matches
};

// Fills count elements of rank's input starting at logical index first.
void fillReduceInput(const ReduceInputs& in, int rank, size_t first, size_t count, void* dst);

// Checks count received elements against the reduction over all ranks of the inputs at logical
// indices first..first+count-1. Returns "" or a description of the first mismatch and how many.
std::string checkReduced(const ReduceInputs& in, size_t first, size_t count, const void* got);

// ---- Data-movement patterns --------------------------------------------------------------------
// Raw bytes that depend on (seed, rank, byte index); used by every non-reducing collective, which
// must move bytes unchanged whatever their dtype.
void fillPattern(void* dst, size_t bytes, uint64_t seed, int rank, uint64_t firstByte);
// Index of the first byte that differs from the pattern, or SIZE_MAX; *mismatches gets the count.
size_t findPatternMismatch(const void* got, size_t bytes, uint64_t seed, int rank,
                           uint64_t firstByte, size_t* mismatches);

uint64_t mix64(uint64_t x);

}  // namespace loomtest
