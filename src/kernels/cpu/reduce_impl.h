// Loop templates behind reduce.cc: one functor per operator and per post-operation, applied by plain
// indexed loops that GCC vectorizes. There is no __restrict because dst may equal a or b; GCC's runtime
// overlap check sends exact aliasing (dependence distance 0) down the vector path too (at -O3, the
// release build's level).
//
// Narrow floats (half, bfloat16, fp8) go through float blocks on the stack: decode a block of a and of b,
// combine and post-process in float, round once, store. Reading both inputs before storing also makes
// in-place use safe.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kernels/cpu/float_convert_inline.h"
#include "kernels/cpu/half_block.h"
#include "kernels/cpu/reduce.h"

namespace loom::cpu {

// Integers are combined in an unsigned type at least as wide as unsigned int, so overflow wraps instead
// of being undefined (and 8-bit values do not promote to signed int first). Floats map to themselves.
template <class T, bool = std::is_integral_v<T>>
struct WrapTypeOf {
  using type = T;
};
template <class T>
struct WrapTypeOf<T, true> {
  using type = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
};
template <class T>
using WrapType = typename WrapTypeOf<T>::type;

template <class T>
struct SumOp {
  T operator()(T x, T y) const { return T(WrapType<T>(x) + WrapType<T>(y)); }
};

template <class T>
struct ProdOp {
  T operator()(T x, T y) const { return T(WrapType<T>(x) * WrapType<T>(y)); }
};

template <class T>
inline bool isNan(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return x != x;
  } else {
    return false;
  }
}

// Max/Min propagate NaN: a comparison with NaN is false, so the isNan test returns x when x is the NaN
// and the fallback returns y when y is. Written as selects so it vectorizes (std::fmax would also drop
// the NaN instead of propagating it).
template <class T>
struct MaxOp {
  T operator()(T x, T y) const { return (x > y || isNan(x)) ? x : y; }
};

template <class T>
struct MinOp {
  T operator()(T x, T y) const { return (x < y || isNan(x)) ? x : y; }
};

// Avg's post-operation. Floats divide (not multiply by a reciprocal, which rounds twice). Integers take
// the quotient truncated toward zero; a zero divisor is treated as 1 and a signed one is clamped to the
// int64 range, only so that no input can reach undefined behaviour.
//
// Integers of up to 32 bits divide in double, because x86 has no vector integer division and a scalar
// one costs tens of cycles. It is exact: for |x| < 2^32 and d <= 2^53, an inexact quotient falls short
// of the next integer k by at least 1/d, which is relatively >= 1/(d*k) >= 2^-33 when k >= 2 (as
// d*k <= |x| + d <= 2|x|) and absolutely >= 2^-53 when k = 1, while rounding moves it by at most 2^-53
// relatively (2^-54 just below 1); so truncating the rounded quotient gives the true one. A larger
// divisor rounds, but the quotient is below 1 either way.
template <class T>
struct DivideBy {
  static constexpr bool kViaDouble = std::is_integral_v<T> && sizeof(T) <= 4;
  // Wide integers divide in int64/uint64, which hold their quotients exactly.
  using Divisor = std::conditional_t<std::is_floating_point_v<T> || kViaDouble,
                                     std::conditional_t<std::is_same_v<T, float>, float, double>,
                                     std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>;
  // The truncating conversion back: int32 where every quotient fits (it vectorizes without AVX-512).
  using Quotient = std::conditional_t<std::is_same_v<T, uint32_t>, int64_t, int32_t>;

  explicit DivideBy(uint64_t divisor) {
    divisor = std::max<uint64_t>(divisor, 1);
    if constexpr (std::is_signed_v<T> && !kViaDouble) {
      divisor = std::min<uint64_t>(divisor, std::numeric_limits<int64_t>::max());
    }
    d = Divisor(divisor);
  }
  T operator()(T x) const {
    if constexpr (kViaDouble) {
      return T(Quotient(double(x) / d));
    } else {
      return T(Divisor(x) / d);
    }
  }
  Divisor d;
};

// PreMulSum's post-operation: float32 (and the narrow floats, computed in float32) multiply by the scalar
// rounded to float, float64 by the double itself, integers by intScalar with wrap-around.
template <class T>
struct MultiplyBy {
  explicit MultiplyBy(const ReduceOp& op) {
    if constexpr (std::is_floating_point_v<T>) {
      s = T(op.scalar);
    } else {
      s = WrapType<T>(op.intScalar);
    }
  }
  T operator()(T x) const { return T(WrapType<T>(x) * s); }
  WrapType<T> s;
};

template <class T, class Op>
inline void zipLoop(T* dst, const T* a, const T* b, size_t n, Op op) {
  for (size_t i = 0; i < n; ++i) dst[i] = op(a[i], b[i]);
}

template <class T, class Op>
inline void mapLoop(T* dst, const T* src, size_t n, Op op) {
  for (size_t i = 0; i < n; ++i) dst[i] = op(src[i]);
}

template <class T>
inline void combine(T* dst, const T* a, const T* b, size_t n, ReduceKind kind) {
  switch (kind) {
    case ReduceKind::Sum: zipLoop(dst, a, b, n, SumOp<T>{}); break;
    case ReduceKind::Prod: zipLoop(dst, a, b, n, ProdOp<T>{}); break;
    case ReduceKind::Max: zipLoop(dst, a, b, n, MaxOp<T>{}); break;
    case ReduceKind::Min: zipLoop(dst, a, b, n, MinOp<T>{}); break;
  }
}

template <class T>
inline void applyPost(T* dst, const T* src, size_t n, PostOpKind post, const ReduceOp& op) {
  switch (post) {
    case PostOpKind::None:
      if (dst != src && n != 0) std::memmove(dst, src, n * sizeof(T));
      break;
    case PostOpKind::Divide: mapLoop(dst, src, n, DivideBy<T>(op.divisor)); break;
    case PostOpKind::Multiply: mapLoop(dst, src, n, MultiplyBy<T>(op)); break;
  }
}

// The post-operation runs over a chunk the combine loop has just written, while it is still in L1.
inline constexpr size_t kPostChunk = 4096;

template <class T>
inline void reduceNative(T* dst, const T* a, const T* b, size_t n, const ReduceOp& op, bool finalize) {
  const PostOpKind post = finalize ? op.post : PostOpKind::None;
  if (post == PostOpKind::None) {
    combine(dst, a, b, n, op.kind);
    return;
  }
  for (size_t i = 0; i < n; i += kPostChunk) {
    const size_t m = std::min(kPostChunk, n - i);
    combine(dst + i, a + i, b + i, m, op.kind);
    applyPost(dst + i, dst + i, m, post, op);
  }
}

template <class T>
inline void copyNative(T* dst, const T* src, size_t n, const ReduceOp& op, bool finalize) {
  applyPost(dst, src, n, finalize ? op.post : PostOpKind::None, op);
}

// A narrow float format: its storage type and its conversions to and from float, one value at a time
// or, where something faster exists, a whole block at a time.
struct HalfCodec {
  using Storage = uint16_t;
  static float decode(Storage v) { return fp::halfToFloatInline(v); }
  static Storage encode(float f) { return fp::floatToHalfInline(f); }
  static void decodeBlock(const Storage* src, float* out, size_t n) { halfToFloatBlock(src, out, n); }
  static void encodeBlock(const float* in, Storage* dst, size_t n) { floatToHalfBlock(in, dst, n); }
};
struct Bfloat16Codec {
  using Storage = uint16_t;
  static float decode(Storage v) { return fp::bfloat16ToFloatInline(v); }
  static Storage encode(float f) { return fp::floatToBfloat16Inline(f); }
};
struct Fp8e4m3Codec {
  using Storage = uint8_t;
  static float decode(Storage v) { return fp::fp8e4m3ToFloatInline(v); }
  static Storage encode(float f) { return fp::floatToFp8e4m3Inline(f); }
};
struct Fp8e5m2Codec {
  using Storage = uint8_t;
  static float decode(Storage v) { return fp::fp8e5m2ToFloatInline(v); }
  static Storage encode(float f) { return fp::floatToFp8e5m2Inline(f); }
};

// Elements per float block: two blocks (4 KiB) stay in L1 and amortise the per-block dispatch.
inline constexpr size_t kFloatBlock = 512;

template <class Codec>
inline void decodeBlock(const typename Codec::Storage* src, float* out, size_t n) {
  if constexpr (requires { Codec::decodeBlock(src, out, n); }) {
    Codec::decodeBlock(src, out, n);
  } else {
    for (size_t i = 0; i < n; ++i) out[i] = Codec::decode(src[i]);
  }
}

template <class Codec>
inline void encodeBlock(const float* in, typename Codec::Storage* dst, size_t n) {
  if constexpr (requires { Codec::encodeBlock(in, dst, n); }) {
    Codec::encodeBlock(in, dst, n);
  } else {
    for (size_t i = 0; i < n; ++i) dst[i] = Codec::encode(in[i]);
  }
}

template <class Codec>
inline void reduceNarrow(typename Codec::Storage* dst, const typename Codec::Storage* a,
                         const typename Codec::Storage* b, size_t n, const ReduceOp& op, bool finalize) {
  const PostOpKind post = finalize ? op.post : PostOpKind::None;
  float x[kFloatBlock];
  float y[kFloatBlock];
  for (size_t i = 0; i < n; i += kFloatBlock) {
    const size_t m = std::min(kFloatBlock, n - i);
    decodeBlock<Codec>(a + i, x, m);
    decodeBlock<Codec>(b + i, y, m);
    combine(x, x, y, m, op.kind);
    applyPost(x, x, m, post, op);
    encodeBlock<Codec>(x, dst + i, m);
  }
}

template <class Codec>
inline void copyNarrow(typename Codec::Storage* dst, const typename Codec::Storage* src, size_t n,
                       const ReduceOp& op, bool finalize) {
  const PostOpKind post = finalize ? op.post : PostOpKind::None;
  if (post == PostOpKind::None) {
    if (dst != src && n != 0) std::memmove(dst, src, n * sizeof(*dst));
    return;
  }
  float x[kFloatBlock];
  for (size_t i = 0; i < n; i += kFloatBlock) {
    const size_t m = std::min(kFloatBlock, n - i);
    decodeBlock<Codec>(src + i, x, m);
    applyPost(x, x, m, post, op);
    encodeBlock<Codec>(x, dst + i, m);
  }
}

template <class T>
inline constexpr bool kIsNative = std::is_arithmetic_v<T>;

// Type-erased front ends, one instantiation per element type (a native type or a codec).
template <class E>
inline void reduceAs(void* dst, const void* a, const void* b, size_t n, const ReduceOp& op, bool finalize) {
  if constexpr (kIsNative<E>) {
    reduceNative(static_cast<E*>(dst), static_cast<const E*>(a), static_cast<const E*>(b), n, op, finalize);
  } else {
    using S = typename E::Storage;
    reduceNarrow<E>(static_cast<S*>(dst), static_cast<const S*>(a), static_cast<const S*>(b), n, op,
                    finalize);
  }
}

template <class E>
inline void copyAs(void* dst, const void* src, size_t n, const ReduceOp& op, bool finalize) {
  if constexpr (kIsNative<E>) {
    copyNative(static_cast<E*>(dst), static_cast<const E*>(src), n, op, finalize);
  } else {
    using S = typename E::Storage;
    copyNarrow<E>(static_cast<S*>(dst), static_cast<const S*>(src), n, op, finalize);
  }
}

}  // namespace loom::cpu
