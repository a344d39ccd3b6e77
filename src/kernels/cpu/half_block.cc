#include "kernels/cpu/half_block.h"

#include "kernels/cpu/float_convert_inline.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define LOOM_F16C_PATH 1
#endif

namespace loom::cpu {

void halfToFloatBlockPortable(const uint16_t* src, float* out, size_t count) {
  for (size_t i = 0; i < count; ++i) out[i] = fp::halfToFloatInline(src[i]);
}

void floatToHalfBlockPortable(const float* in, uint16_t* dst, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i] = fp::floatToHalfInline(in[i]);
}

#ifdef LOOM_F16C_PATH

bool cpuHasF16c() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
  }();
  return has;
}

// vcvtph2ps is exact and makes NaNs quiet keeping sign and payload, as halfToFloat does; it ignores
// MXCSR's denormals-are-zero for half inputs.
__attribute__((target("avx,f16c"))) void halfToFloatBlockF16c(const uint16_t* src, float* out, size_t count) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < count; ++i) out[i] = fp::halfToFloatInline(src[i]);
}

// vcvtps2ph with an explicit round-to-nearest-even (not MXCSR's mode) keeps subnormals and overflows to
// infinity like floatToHalf; only its NaN (the payload kept) differs, so NaN lanes get CUDA's 0x7fff.
__attribute__((target("avx,f16c"))) void floatToHalfBlockF16c(const float* in, uint16_t* dst, size_t count) {
  const __m128i canonicalNan = _mm_set1_epi16(0x7fff);
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256 x = _mm256_loadu_ps(in + i);
    const __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT);
    const __m256i nan32 = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    const __m128i nan16 =
        _mm_packs_epi32(_mm256_castsi256_si128(nan32), _mm256_extractf128_si256(nan32, 1));  // -1/0 lanes
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm_blendv_epi8(h, canonicalNan, nan16));
  }
  for (; i < count; ++i) dst[i] = fp::floatToHalfInline(in[i]);
}

#else

bool cpuHasF16c() { return false; }
void halfToFloatBlockF16c(const uint16_t* src, float* out, size_t count) {
  halfToFloatBlockPortable(src, out, count);
}
void floatToHalfBlockF16c(const float* in, uint16_t* dst, size_t count) {
  floatToHalfBlockPortable(in, dst, count);
}

#endif

void halfToFloatBlock(const uint16_t* src, float* out, size_t count) {
  if (cpuHasF16c()) {
    halfToFloatBlockF16c(src, out, count);
  } else {
    halfToFloatBlockPortable(src, out, count);
  }
}

void floatToHalfBlock(const float* in, uint16_t* dst, size_t count) {
  if (cpuHasF16c()) {
    floatToHalfBlockF16c(in, dst, count);
  } else {
    floatToHalfBlockPortable(in, dst, count);
  }
}

}  // namespace loom::cpu

#undef LOOM_F16C_PATH  // unity builds: the sources compiled after this one do not see it
