#include "kernel_variants.h"

#include <cstdint>

#include "kernels/cpu/reduce_impl.h"

namespace loomtest {
namespace {

using loom::ReduceOp;
using namespace loom::cpu;

// Calls f with a value of the element type (a native type or a codec) of dtype.
template <class F>
inline void withElementType(loomDataType_t dtype, F&& f) {
  switch (dtype) {
    case loomInt8: f(int8_t{}); break;
    case loomUint8: f(uint8_t{}); break;
    case loomInt32: f(int32_t{}); break;
    case loomUint32: f(uint32_t{}); break;
    case loomInt64: f(int64_t{}); break;
    case loomUint64: f(uint64_t{}); break;
    case loomFloat16: f(HalfCodec{}); break;
    case loomFloat32: f(float{}); break;
    case loomFloat64: f(double{}); break;
    case loomBfloat16: f(Bfloat16Codec{}); break;
    case loomFloat8e4m3: f(Fp8e4m3Codec{}); break;
    default: f(Fp8e5m2Codec{}); break;
  }
}

inline void reduceAny(void* d, const void* a, const void* b, size_t n, loomDataType_t t, const ReduceOp& op,
                      bool fin) {
  withElementType(t, [&](auto e) { reduceAs<decltype(e)>(d, a, b, n, op, fin); });
}

inline void copyAny(void* d, const void* s, size_t n, loomDataType_t t, const ReduceOp& op, bool fin) {
  withElementType(t, [&](auto e) { copyAs<decltype(e)>(d, s, n, op, fin); });
}

inline void decodeAny(loomDataType_t t, const void* src, float* out, size_t n) {
  withElementType(t, [&](auto e) {
    using E = decltype(e);
    if constexpr (!kIsNative<E>) decodeBlock<E>(static_cast<const typename E::Storage*>(src), out, n);
  });
}

inline void encodeAny(loomDataType_t t, const float* in, void* dst, size_t n) {
  withElementType(t, [&](auto e) {
    using E = decltype(e);
    if constexpr (!kIsNative<E>) encodeBlock<E>(in, static_cast<typename E::Storage*>(dst), n);
  });
}

// One set of wrappers per instruction set; `flatten` inlines the templates so they are compiled for it.
#define LOOM_TEST_VARIANT(suffix, attrs)                                                                    \
  attrs void reduce##suffix(void* d, const void* a, const void* b, size_t n, loomDataType_t t,              \
                            const ReduceOp& op, bool fin) {                                                 \
    reduceAny(d, a, b, n, t, op, fin);                                                                      \
  }                                                                                                         \
  attrs void copy##suffix(void* d, const void* s, size_t n, loomDataType_t t, const ReduceOp& op,           \
                          bool fin) {                                                                       \
    copyAny(d, s, n, t, op, fin);                                                                           \
  }                                                                                                         \
  attrs void decode##suffix(loomDataType_t t, const void* s, float* o, size_t n) { decodeAny(t, s, o, n); } \
  attrs void encode##suffix(loomDataType_t t, const float* i, void* d, size_t n) { encodeAny(t, i, d, n); }

LOOM_TEST_VARIANT(Baseline, __attribute__((flatten)))
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define LOOM_TEST_X86_BUILDS 1
LOOM_TEST_VARIANT(V3, __attribute__((target("arch=x86-64-v3"), flatten)))
LOOM_TEST_VARIANT(V4, __attribute__((target("arch=x86-64-v4"), flatten)))
#endif
#undef LOOM_TEST_VARIANT

}  // namespace

std::vector<KernelVariant> kernelVariants() {
  std::vector<KernelVariant> v{{"public", loom::reduceArrays, loom::copyArray, nullptr, nullptr},
                               {"baseline", reduceBaseline, copyBaseline, decodeBaseline, encodeBaseline}};
#ifdef LOOM_TEST_X86_BUILDS
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v3")) v.push_back({"x86-64-v3", reduceV3, copyV3, decodeV3, encodeV3});
  if (__builtin_cpu_supports("x86-64-v4")) v.push_back({"x86-64-v4", reduceV4, copyV4, decodeV4, encodeV4});
#endif
  return v;
}

}  // namespace loomtest

#undef LOOM_TEST_X86_BUILDS  // unity builds: the sources compiled after this one do not see it
