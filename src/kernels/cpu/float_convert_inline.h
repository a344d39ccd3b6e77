// Branchless float32 <-> narrow-float conversions. They are inline and free of branches so that the
// reduce kernels' block loops vectorize (every case is computed and the right one selected); the
// out-of-line functions of float_convert.h are thin wrappers around them, so both agree bit for bit
// (half blocks use F16C where present, see half_block.h, with the same results).
//
// NaN rule: encoding turns every NaN into the format's canonical NaN, 0x7fff (half, bfloat16) or 0x7f
// (both fp8), sign and payload dropped, as CUDA's conversions do (cuda_fp16.h, cuda_bf16.h and
// cuda_fp8.h's host code matched bit for bit over every float32, CUDA 13.0), so that CPU and GPU
// reductions agree even on NaN. Decoding gives a quiet float NaN that keeps the sign and payload (only
// float arithmetic ever sees it).
//
// Everything is integer arithmetic on the float's bits plus exact int-to-float conversions, so it does
// not depend on the FPU's rounding mode or on flush-to-zero/denormals-are-zero settings.
#pragma once

#include <bit>
#include <cstdint>

namespace loom::fp {

inline uint32_t bitsOf(float f) { return std::bit_cast<uint32_t>(f); }
inline float floatOf(uint32_t u) { return std::bit_cast<float>(u); }

inline constexpr uint32_t kFloatInf = 0x7f800000u;
inline constexpr uint32_t kFloatQuiet = 0x00400000u;

// An IEEE-style binary format with kExp exponent bits and kMant explicit mantissa bits.
template <int kExp, int kMant>
struct Format {
  static constexpr int kBias = (1 << (kExp - 1)) - 1;
  static constexpr int kMantBits = kMant;
  static constexpr int kSignShift = kExp + kMant;
  static constexpr int kDrop = 23 - kMant;  // float mantissa bits that do not fit
  static constexpr uint32_t kExpMax = (1u << kExp) - 1;
  static constexpr uint32_t kMantMask = (1u << kMant) - 1;
  // Float bits of the smallest normal, 2^(1-bias).
  static constexpr uint32_t kMinNormalBits = uint32_t(127 + 1 - kBias) << 23;
};

using HalfFormat = Format<5, 10>;
using E4m3Format = Format<4, 3>;
using E5m2Format = Format<5, 2>;

// Rounds a finite non-negative float (given as bits) to the format's magnitude bits, nearest-even.
// Values past the largest finite number give garbage the callers replace. Integer-only on purpose: GCC
// will not if-convert (and so not vectorize) a select fed by float arithmetic under -ftrapping-math.
template <class F>
inline uint32_t roundMagnitude(uint32_t absBits) {
  constexpr uint32_t kMinNormalExp = F::kMinNormalBits >> 23;  // float's biased exponent of 2^(1-bias)
  const uint32_t exp = absBits >> 23;
  const uint32_t significand = (absBits & 0x7fffffu) | 0x800000u;
  // Normal results: the narrow exponent above 1 joins the significand, which then only loses kDrop bits
  // (a carry out of the mantissa moves into the exponent correctly). Subnormal results: the significand
  // loses one more bit per binade below the smallest normal; a shift past 31 (far below the smallest
  // subnormal, or a float subnormal) is clamped and still rounds to zero.
  const bool normal = exp >= kMinNormalExp;
  const uint32_t value = normal ? ((exp - kMinNormalExp) << 23) + significand : significand;
  const uint32_t shiftRaw = normal ? uint32_t(F::kDrop) : uint32_t(F::kDrop) + kMinNormalExp - exp;
  const uint32_t shift = shiftRaw > 31u ? 31u : shiftRaw;
  // Add just under half an ulp plus the kept LSB, so that exact halves round to the even neighbour.
  return (value + ((1u << (shift - 1u)) - 1u) + ((value >> shift) & 1u)) >> shift;
}

// Decodes a narrow value (low kExp+kMant+1 bits of v). kIeeeSpecials: the top exponent means inf/NaN
// (half, e5m2); otherwise only the all-ones pattern is NaN and the top exponent is normal (e4m3 "fn").
template <class F, bool kIeeeSpecials>
inline float narrowToFloat(uint32_t v) {
  const uint32_t sign = ((v >> F::kSignShift) & 1u) << 31;
  const uint32_t mant = v & F::kMantMask;
  const uint32_t exp = (v >> F::kMantBits) & F::kExpMax;
  // Normal and subnormal alike: the value is the integer significand (implicit bit included for
  // normals) times 2^(max(exp,1) - bias - kMant). The int-to-float conversion is exact and the scaling
  // is an integer add to the exponent field. The conversion feeds every lane unconditionally: under
  // -ftrapping-math GCC would not vectorize it inside one arm of a select.
  const uint32_t isNormal = exp != 0 ? 1u : 0u;
  const uint32_t significand = mant | (isNormal << F::kMantBits);
  const uint32_t scale = (exp | (isNormal ^ 1u)) - uint32_t(F::kBias + F::kMantBits);  // wraps by design
  const uint32_t converted = bitsOf(float(int32_t(significand)));
  uint32_t bits = converted + (converted == 0 ? 0u : scale << 23);  // zero stays zero
  if constexpr (kIeeeSpecials) {
    const uint32_t special = kFloatInf | (mant << F::kDrop) | (mant != 0 ? kFloatQuiet : 0u);
    bits = exp == F::kExpMax ? special : bits;
  } else {
    bits = (exp == F::kExpMax && mant == F::kMantMask) ? (kFloatInf | kFloatQuiet) : bits;
  }
  return floatOf(sign | bits);
}

inline float halfToFloatInline(uint16_t h) { return narrowToFloat<HalfFormat, true>(h); }
inline float fp8e4m3ToFloatInline(uint8_t v) { return narrowToFloat<E4m3Format, false>(v); }
inline float fp8e5m2ToFloatInline(uint8_t v) { return narrowToFloat<E5m2Format, true>(v); }

inline float bfloat16ToFloatInline(uint16_t b) {
  const uint32_t bits = uint32_t(b) << 16;
  const bool nan = (bits & 0x7fffffffu) > kFloatInf;
  return floatOf(nan ? bits | kFloatQuiet : bits);
}

inline uint16_t floatToHalfInline(float f) {
  const uint32_t x = bitsOf(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t a = x & 0x7fffffffu;
  uint32_t r = sign | roundMagnitude<HalfFormat>(a);
  r = a >= 0x477ff000u ? (sign | 0x7c00u) : r;  // 65520 and up round past 65504: infinity
  r = a > kFloatInf ? 0x7fffu : r;
  return uint16_t(r);
}

inline uint16_t floatToBfloat16Inline(float f) {
  const uint32_t x = bitsOf(f);
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;  // overflow carries into inf
  return uint16_t((x & 0x7fffffffu) > kFloatInf ? 0x7fffu : rounded);
}

// cuda_fp8.h __NV_SATFINITE, e4m3 ("fn"): above 464 (448 + half an ulp; 464 itself ties to 448),
// including infinity, saturates to 448.
inline uint8_t floatToFp8e4m3Inline(float f) {
  const uint32_t x = bitsOf(f);
  const uint32_t sign = (x >> 24) & 0x80u;
  const uint32_t a = x & 0x7fffffffu;
  uint32_t r = roundMagnitude<E4m3Format>(a);
  r = sign | (a > 0x43e80000u ? 0x7eu : r);  // > 464
  r = a > kFloatInf ? 0x7fu : r;
  return uint8_t(r);
}

// cuda_fp8.h __NV_SATFINITE, e5m2: 61440 (the tie between 57344 and infinity) and up, including
// infinity, saturates to 57344.
inline uint8_t floatToFp8e5m2Inline(float f) {
  const uint32_t x = bitsOf(f);
  const uint32_t sign = (x >> 24) & 0x80u;
  const uint32_t a = x & 0x7fffffffu;
  uint32_t r = roundMagnitude<E5m2Format>(a);
  r = sign | (a >= 0x47700000u ? 0x7bu : r);  // >= 61440
  r = a > kFloatInf ? 0x7fu : r;
  return uint8_t(r);
}

}  // namespace loom::fp
