// CPU reduction and copy kernels for every loomDataType_t and operator.
//
// 16- and 8-bit floats (half, bfloat16, fp8 e4m3/e5m2) are widened to float32, combined, and rounded
// back to nearest-even (fp8 saturating to the largest finite value, as cuda_fp8.h's default does).
// Avg and PreMulSum are a sum followed by a post-operation applied once, to the complete value:
// Avg divides by nranks (integers: the integer quotient of the sum), PreMulSum multiplies by its scalar.
#pragma once

#include <cstddef>
#include <cstdint>

#include "loom.h"

namespace loom {

enum class ReduceKind : uint8_t { Sum, Prod, Max, Min };
enum class PostOpKind : uint8_t { None, Divide, Multiply };

struct ReduceOp {
  ReduceKind kind = ReduceKind::Sum;
  PostOpKind post = PostOpKind::None;
  uint64_t divisor = 1;        // PostOpKind::Divide (nranks)
  double scalar = 1.0;         // PostOpKind::Multiply on floating types
  int64_t intScalar = 1;       // PostOpKind::Multiply on integer types (wraps like the type does)
};

// dst[i] = a[i] (op) b[i], then the post-operation when finalize is set. dst may alias a or b.
void reduceArrays(void* dst, const void* a, const void* b, size_t count, loomDataType_t dtype,
                  const ReduceOp& op, bool finalize);

// dst[i] = post(src[i]) when finalize is set, a plain copy otherwise. dst may equal src.
void copyArray(void* dst, const void* src, size_t count, loomDataType_t dtype, const ReduceOp& op,
               bool finalize);

}  // namespace loom
