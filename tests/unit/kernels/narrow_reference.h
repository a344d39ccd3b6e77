// The tests' own model of the narrow float formats, written from their definitions and not from the
// library's bit tricks: decoding with ldexp, and encoding by searching the sorted list of representable
// values for the nearest one (ties to the even code), then applying the overflow rule.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace loomtest {

struct NarrowSpec {
  const char* name;
  int expBits;
  int mantBits;
  bool ieeeSpecials;      // top exponent = inf/NaN; otherwise only the all-ones code is NaN (e4m3fn)
  uint32_t overflowCode;  // what values past the largest finite number become: inf or the saturated max
};

inline constexpr NarrowSpec kHalfSpec{"half", 5, 10, true, 0x7c00};
inline constexpr NarrowSpec kBfloat16Spec{"bfloat16", 8, 7, true, 0x7f80};
inline constexpr NarrowSpec kE4m3Spec{"e4m3", 4, 3, false, 0x7e};  // cuda SATFINITE: 448
inline constexpr NarrowSpec kE5m2Spec{"e5m2", 5, 2, true, 0x7b};   // cuda SATFINITE: 57344

inline int bias(const NarrowSpec& s) { return (1 << (s.expBits - 1)) - 1; }
inline uint32_t signBit(const NarrowSpec& s) { return 1u << (s.expBits + s.mantBits); }
inline uint32_t codeCount(const NarrowSpec& s) { return signBit(s) << 1; }

inline bool isNanCode(const NarrowSpec& s, uint32_t code) {
  const uint32_t mag = code & (signBit(s) - 1);
  const uint32_t expMax = (1u << s.expBits) - 1;
  const uint32_t exp = mag >> s.mantBits;
  const uint32_t mant = mag & ((1u << s.mantBits) - 1);
  if (s.ieeeSpecials) return exp == expMax && mant != 0;
  return mag == signBit(s) - 1;
}

inline double referenceDecode(const NarrowSpec& s, uint32_t code) {
  const uint32_t expMax = (1u << s.expBits) - 1;
  const bool negative = (code & signBit(s)) != 0;
  const uint32_t mag = code & (signBit(s) - 1);
  const int exp = int(mag >> s.mantBits);
  const int mant = int(mag & ((1u << s.mantBits) - 1));
  double v;
  if (isNanCode(s, code)) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (s.ieeeSpecials && uint32_t(exp) == expMax) {
    v = std::numeric_limits<double>::infinity();
  } else if (exp == 0) {
    v = std::ldexp(double(mant), 1 - bias(s) - s.mantBits);
  } else {
    v = std::ldexp(1.0 + std::ldexp(double(mant), -s.mantBits), exp - bias(s));
  }
  return negative ? -v : v;
}

// Largest finite magnitude code: below the inf exponent (IEEE) or below the NaN code (e4m3fn).
inline uint32_t maxFiniteCode(const NarrowSpec& s) {
  return s.ieeeSpecials ? ((((1u << s.expBits) - 1) << s.mantBits) - 1) : signBit(s) - 2;
}

// Non-negative finite values indexed by code, plus one more: the value the next code would have with an
// unbounded exponent (where rounding lands when it overflows).
inline std::vector<double> positiveValues(const NarrowSpec& s) {
  std::vector<double> values;
  const uint32_t maxCode = maxFiniteCode(s);
  for (uint32_t c = 0; c <= maxCode; ++c) values.push_back(referenceDecode(s, c));
  values.push_back(values[maxCode] + (values[maxCode] - values[maxCode - 1]));
  return values;
}

// Nearest representable value, ties to the even code, overflow per the spec; v must not be NaN.
inline uint32_t referenceEncode(const NarrowSpec& s, const std::vector<double>& values, double v) {
  const uint32_t sign = std::signbit(v) ? signBit(s) : 0;
  const double mag = std::fabs(v);
  const uint32_t overflowIndex = uint32_t(values.size() - 1);
  uint32_t code;
  if (mag >= values.back()) {
    code = overflowIndex;
  } else {
    const auto upper = std::upper_bound(values.begin(), values.end(), mag);  // first value > mag
    const uint32_t hi = uint32_t(upper - values.begin());
    const uint32_t lo = hi - 1;  // values[lo] <= mag < values[hi]
    const double dlo = mag - values[lo];
    const double dhi = values[hi] - mag;
    code = dlo < dhi ? lo : (dhi < dlo ? hi : ((lo & 1u) == 0 ? lo : hi));
  }
  if (code == overflowIndex) code = s.overflowCode;
  return sign | code;
}

}  // namespace loomtest
