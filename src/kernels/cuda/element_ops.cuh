// The arithmetic of the CUDA reduce/copy kernels, written once as __host__ __device__ code so that the
// very same functions run in the kernels (device_kernels.cu) and, on any machine, in a host emulation
// that the tests compare against the CPU kernels (tests/gpu/test_kernels_emulated.cc). This header
// compiles with nvcc and with a plain C++ compiler (CUDA's fp16/bf16/fp8 headers have host paths).
//
// Semantics are those of src/kernels/cpu/reduce.h, element for element:
// - integers combine in an unsigned type at least as wide as unsigned int (wrap-around); Max/Min
//   compare natively; Avg divides the complete sum in int64 (signed) or uint64 (unsigned), truncating;
//   PreMulSum multiplies by intScalar with wrap-around;
// - float32/float64 combine natively; Max/Min propagate a NaN operand; Avg divides by float(nranks)
//   (double for float64), PreMulSum multiplies by the scalar rounded to the type;
// - half, bfloat16, fp8 e4m3/e5m2 decode to float, combine and post-process in float, and round once,
//   to nearest even (fp8 saturating to the largest finite value, __NV_SATFINITE). NaNs encode to the
//   canonical NaN (0x7fff, 0x7f), as the CPU converters do.
// The post-operation (Avg, PreMulSum) applies only when the launch finalizes.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <vector_types.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/reduce.h"

#if defined(__CUDACC__)
#define LOOM_HD __host__ __device__ __forceinline__
#define LOOM_UNROLL _Pragma("unroll")
#else
#define LOOM_HD inline
#define LOOM_UNROLL _Pragma("GCC unroll 16")
#endif

namespace loom::cuda {

inline constexpr size_t kVectorBytes = 16;

// One elementwise launch: dst[i] = post(a[i] op b[i]) (reduce) or dst[i] = post(a[i]) (copy: b null),
// and the same value into dst2[i] where dst2 is set (the plan interpreter's reduce-and-forward: one
// pass writes this rank's result and the message to the next rank). The `vectors` 16-byte vectors
// starting at element `head` are aligned for all pointers; the `head` elements before them and the rest
// after them are done one element at a time.
struct ElementwiseArgs {
  void* dst = nullptr;
  void* dst2 = nullptr;
  const void* a = nullptr;
  const void* b = nullptr;
  size_t count = 0;
  size_t head = 0;
  size_t vectors = 0;
  ReduceKind kind = ReduceKind::Sum;
  PostOpKind post = PostOpKind::None;  // already None when the launch does not finalize
  uint64_t divisor = 1;
  double scalar = 1.0;
  int64_t intScalar = 1;
};

// Splits count elements of elemSize bytes into head / aligned vectors / tail. When the pointers are
// misaligned differently there is no common aligned part and everything goes element by element.
// (Host and device: the plan interpreter, plan_interpreter.cuh, sets up its copies on the device.)
LOOM_HD void planVectors(ElementwiseArgs* args, size_t elemSize) {
  const uintptr_t d = reinterpret_cast<uintptr_t>(args->dst) % kVectorBytes;
  const uintptr_t a = reinterpret_cast<uintptr_t>(args->a) % kVectorBytes;
  const uintptr_t b = args->b ? reinterpret_cast<uintptr_t>(args->b) % kVectorBytes : d;
  const uintptr_t d2 = args->dst2 ? reinterpret_cast<uintptr_t>(args->dst2) % kVectorBytes : d;
  args->head = 0;
  args->vectors = 0;
  if (d != a || d != b || d != d2 || d % elemSize != 0) {
    args->head = args->count;
    return;
  }
  const size_t headElems = d == 0 ? 0 : (kVectorBytes - d) / elemSize;
  if (headElems >= args->count) {
    args->head = args->count;
    return;
  }
  args->head = headElems;
  args->vectors = (args->count - headElems) * elemSize / kVectorBytes;
}

// ---- Element types: storage, the type arithmetic happens in, and the conversions --------------------

template <class T>
struct NativeElem {
  using Storage = T;
  using Compute = T;
  static LOOM_HD T load(T v) { return v; }
  static LOOM_HD T store(T v) { return v; }
};

struct HalfElem {
  using Storage = uint16_t;
  using Compute = float;
  static LOOM_HD float load(uint16_t v) {
    __half_raw r;
    r.x = v;
    return __half2float(__half(r));
  }
  static LOOM_HD uint16_t store(float f) { return static_cast<__half_raw>(__float2half_rn(f)).x; }
};

struct Bfloat16Elem {
  using Storage = uint16_t;
  using Compute = float;
  static LOOM_HD float load(uint16_t v) {
    __nv_bfloat16_raw r;
    r.x = v;
    return __bfloat162float(__nv_bfloat16(r));
  }
  static LOOM_HD uint16_t store(float f) { return static_cast<__nv_bfloat16_raw>(__float2bfloat16_rn(f)).x; }
};

template <__nv_fp8_interpretation_t kFormat>
LOOM_HD float fp8ToFloat(uint8_t v) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(v, kFormat)));
}
template <__nv_fp8_interpretation_t kFormat>
LOOM_HD uint8_t floatToFp8(float f) {
  return __nv_cvt_float_to_fp8(f, __NV_SATFINITE, kFormat);
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
// Before sm_89 the fp8 conversions are long software sequences: called, not inlined 16 times per
// vector, which keeps the sm_80 build's compile time and code size down (fp8 is not native there).
#define LOOM_FP8_OUT_OF_LINE 1
template <__nv_fp8_interpretation_t kFormat>
__device__ __noinline__ float fp8ToFloatCall(uint8_t v) {
  return fp8ToFloat<kFormat>(v);
}
template <__nv_fp8_interpretation_t kFormat>
__device__ __noinline__ uint8_t floatToFp8Call(float f) {
  return floatToFp8<kFormat>(f);
}
#endif

template <__nv_fp8_interpretation_t kFormat>
struct Fp8Elem {
  using Storage = uint8_t;
  using Compute = float;
#if defined(LOOM_FP8_OUT_OF_LINE)
  static LOOM_HD float load(uint8_t v) { return fp8ToFloatCall<kFormat>(v); }
  static LOOM_HD uint8_t store(float f) { return floatToFp8Call<kFormat>(f); }
#else
  static LOOM_HD float load(uint8_t v) { return fp8ToFloat<kFormat>(v); }
  static LOOM_HD uint8_t store(float f) { return floatToFp8<kFormat>(f); }
#endif
};
using Fp8e4m3Elem = Fp8Elem<__NV_E4M3>;
using Fp8e5m2Elem = Fp8Elem<__NV_E5M2>;

// Calls fn(Elem{}) for the element type of dtype; false for an unknown dtype.
template <class Fn>
inline bool withElem(loomDataType_t dtype, Fn&& fn) {
  switch (dtype) {
    case loomInt8: fn(NativeElem<int8_t>{}); return true;
    case loomUint8: fn(NativeElem<uint8_t>{}); return true;
    case loomInt32: fn(NativeElem<int32_t>{}); return true;
    case loomUint32: fn(NativeElem<uint32_t>{}); return true;
    case loomInt64: fn(NativeElem<int64_t>{}); return true;
    case loomUint64: fn(NativeElem<uint64_t>{}); return true;
    case loomFloat16: fn(HalfElem{}); return true;
    case loomFloat32: fn(NativeElem<float>{}); return true;
    case loomFloat64: fn(NativeElem<double>{}); return true;
    case loomBfloat16: fn(Bfloat16Elem{}); return true;
    case loomFloat8e4m3: fn(Fp8e4m3Elem{}); return true;
    case loomFloat8e5m2: fn(Fp8e5m2Elem{}); return true;
    default: return false;
  }
}

// ---- Operators (on the compute type) -------------------------------------------------------------

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

// The combine step, chosen at compile time inside each kernel; Copy has no second operand.
enum class Combine : int { Sum = 0, Prod = 1, Max = 2, Min = 3, Copy = 4 };

template <class C>
LOOM_HD bool isNan(C x) {
  if constexpr (std::is_floating_point_v<C>) {
    return x != x;
  } else {
    return false;
  }
}

template <Combine K, class C>
LOOM_HD C combine(C x, C y) {
  using W = WrapType<C>;
  if constexpr (K == Combine::Sum) return C(W(x) + W(y));
  if constexpr (K == Combine::Prod) return C(W(x) * W(y));
  if constexpr (K == Combine::Max) return (x > y || isNan(x)) ? x : y;
  if constexpr (K == Combine::Min) return (x < y || isNan(x)) ? x : y;
  return x;
}

// The post-operation, with its operand converted once to the compute type.
template <class C>
struct PostOp {
  using Divisor = std::conditional_t<std::is_floating_point_v<C>, C,
                                     std::conditional_t<std::is_signed_v<C>, int64_t, uint64_t>>;
  PostOpKind kind;
  Divisor divisor;
  WrapType<C> factor;

  LOOM_HD explicit PostOp(const ElementwiseArgs& args) : kind(args.post) {
    uint64_t d = args.divisor < 1 ? 1 : args.divisor;
    if constexpr (std::is_integral_v<C> && std::is_signed_v<C>) {
      if (d > uint64_t(INT64_MAX)) d = uint64_t(INT64_MAX);
    }
    divisor = Divisor(d);
    if constexpr (std::is_floating_point_v<C>) {
      factor = C(args.scalar);
    } else {
      factor = WrapType<C>(args.intScalar);
    }
  }

  LOOM_HD C apply(C x) const {
    switch (kind) {
      case PostOpKind::Divide: return C(Divisor(x) / divisor);
      case PostOpKind::Multiply: return C(WrapType<C>(x) * factor);
      default: return x;
    }
  }
};

// ---- The loop one thread runs (grid-stride): the kernels call it with their thread index --------

template <class S>
LOOM_HD uint4 loadVector(const S* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const uint4*>(p);
#else
  uint4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
#endif
}

template <class S>
LOOM_HD void storeVector(S* p, const uint4& v) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<uint4*>(p) = v;
#else
  std::memcpy(p, &v, sizeof v);
#endif
}

template <class E, Combine K>
LOOM_HD typename E::Storage oneElement(typename E::Storage x, typename E::Storage y, const PostOp<typename E::Compute>& post) {
  if constexpr (K == Combine::Copy) {
    // Without a post-operation a copy moves bits (as the CPU's memmove does: NaN payloads survive).
    return post.kind == PostOpKind::None ? x : E::store(post.apply(E::load(x)));
  } else {
    return E::store(post.apply(combine<K>(E::load(x), E::load(y))));
  }
}

// 16-byte vectors per thread and source in flight: each iteration loads them all before it computes
// any. The elementwise kernels (device_kernels.cu) keep 2, which lets 4 of their 512-thread blocks share
// an SM; the plan kernel, one block per SM, keeps 4 in flight (plan_interpreter.cuh, kPlanUnroll).
inline constexpr size_t kUnroll = 2;

template <class E, Combine K, size_t Unroll>
LOOM_HD void elementwiseRange(const ElementwiseArgs& args, size_t tid, size_t nthreads) {
  using S = typename E::Storage;
  constexpr size_t V = kVectorBytes / sizeof(S);
  const PostOp<typename E::Compute> post(args);
  const S* a = static_cast<const S*>(args.a);
  const S* b = static_cast<const S*>(args.b);
  S* dst = static_cast<S*>(args.dst);
  S* dst2 = static_cast<S*>(args.dst2);

  for (size_t first = tid; first < args.vectors; first += nthreads * Unroll) {
    uint4 va[Unroll]{}, vb[Unroll]{};
LOOM_UNROLL
    for (size_t u = 0; u < Unroll; ++u) {
      const size_t v = first + u * nthreads;
      if (v < args.vectors) {
        va[u] = loadVector(a + args.head + v * V);
        if constexpr (K != Combine::Copy) vb[u] = loadVector(b + args.head + v * V);
      }
    }
LOOM_UNROLL
    for (size_t u = 0; u < Unroll; ++u) {
      const size_t v = first + u * nthreads;
      if (v >= args.vectors) break;
      S x[V], y[V], out[V];
      std::memcpy(x, &va[u], sizeof x);
      if constexpr (K != Combine::Copy) std::memcpy(y, &vb[u], sizeof y);
LOOM_UNROLL
      for (size_t j = 0; j < V; ++j) out[j] = oneElement<E, K>(x[j], K == Combine::Copy ? x[j] : y[j], post);
      uint4 result;
      std::memcpy(&result, out, sizeof result);
      storeVector(dst + args.head + v * V, result);
      if (dst2) storeVector(dst2 + args.head + v * V, result);
    }
  }

  // The unaligned head and the tail, element by element.
  const size_t tailStart = args.head + args.vectors * V;
  const size_t edge = args.head + (args.count - tailStart);
  for (size_t e = tid; e < edge; e += nthreads) {
    const size_t i = e < args.head ? e : tailStart + (e - args.head);
    const S out = oneElement<E, K>(a[i], K == Combine::Copy ? a[i] : b[i], post);
    dst[i] = out;
    if (dst2) dst2[i] = out;
  }
}

// Fills ElementwiseArgs for a reduce (b != null) or copy (b == null) of count elements of dtype, also
// stored into dst2 when it is set.
LOOM_HD ElementwiseArgs makeArgs(void* dst, const void* a, const void* b, size_t count, size_t elemSize,
                                const ReduceOp& op, bool finalize, void* dst2 = nullptr) {
  ElementwiseArgs args;
  args.dst = dst;
  args.dst2 = dst2;
  args.a = a;
  args.b = b;
  args.count = count;
  args.kind = op.kind;
  args.post = finalize ? op.post : PostOpKind::None;
  args.divisor = op.divisor;
  args.scalar = op.scalar;
  args.intScalar = op.intScalar;
  planVectors(&args, elemSize);
  return args;
}

// What one GPU thread (index tid of nthreads) does in a launch: the kernel of each element type is
// this, with the combine step picked by a switch that is uniform across the grid.
template <class E, size_t Unroll = kUnroll>
LOOM_HD void elementwiseThread(const ElementwiseArgs& args, size_t tid, size_t nthreads) {
  if (!args.b) {
    elementwiseRange<E, Combine::Copy, Unroll>(args, tid, nthreads);
    return;
  }
  switch (args.kind) {
    case ReduceKind::Sum: elementwiseRange<E, Combine::Sum, Unroll>(args, tid, nthreads); break;
    case ReduceKind::Prod: elementwiseRange<E, Combine::Prod, Unroll>(args, tid, nthreads); break;
    case ReduceKind::Max: elementwiseRange<E, Combine::Max, Unroll>(args, tid, nthreads); break;
    case ReduceKind::Min: elementwiseRange<E, Combine::Min, Unroll>(args, tid, nthreads); break;
  }
}

// Runs a launch's work on the host, thread after thread, as nthreads GPU threads would split it
// (for the tests: same code as the kernel, no GPU needed).
template <class E>
inline void emulateElementwise(const ElementwiseArgs& args, size_t nthreads) {
  for (size_t t = 0; t < nthreads; ++t) elementwiseThread<E>(args, t, nthreads);
}

}  // namespace loom::cuda
