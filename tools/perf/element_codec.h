// Element encoders/decoders for every loom data type, written independently of the library's own
// conversion kernels so that the checker does not share their bugs. Values pass through double, which
// holds every value loom-perf generates exactly.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "loom.h"

namespace loomperf {

template <typename T, loomDataType_t Type>
struct IntCodec {
  using Storage = T;
  static constexpr loomDataType_t type = Type;
  static T encode(double v) { return static_cast<T>(v); }
  static double decode(T x) { return static_cast<double>(x); }
  // Outside every range loom-perf generates (see DataTypeInfo::maxExact).
  static T poison() {
    return std::is_signed_v<T> ? std::numeric_limits<T>::min() : std::numeric_limits<T>::max();
  }
  static double ulp(double) { return 1.0; }
};

// IEEE-style binary format with ExpBits/ManBits; FiniteOnly is the OCP "fn" variant of e4m3 (no
// infinities, only S.1111.111 is NaN). Rounds to nearest even.
template <int ExpBits, int ManBits, bool FiniteOnly>
struct MiniFloatFormat {
  static constexpr int bias = (1 << (ExpBits - 1)) - 1;
  static constexpr int minExp = 1 - bias;
  static constexpr uint32_t expMask = (1u << ExpBits) - 1;
  static constexpr uint32_t manMask = (1u << ManBits) - 1;
  static constexpr uint32_t nanBits = (expMask << ManBits) | manMask;

  static double decode(uint32_t bits) {
    const bool negative = (bits >> (ExpBits + ManBits)) & 1;
    const uint32_t field = (bits >> ManBits) & expMask;
    const uint32_t mantissa = bits & manMask;
    double v;
    if (field == 0) {
      v = std::ldexp(static_cast<double>(mantissa), minExp - ManBits);
    } else if (field == expMask && (!FiniteOnly || mantissa == manMask)) {
      v = (FiniteOnly || mantissa != 0) ? std::numeric_limits<double>::quiet_NaN()
                                        : std::numeric_limits<double>::infinity();
    } else {
      v = std::ldexp(static_cast<double>(mantissa | (1u << ManBits)),
                     static_cast<int>(field) - bias - ManBits);
    }
    return negative ? -v : v;
  }

  static uint32_t encode(double x) {
    if (std::isnan(x)) return nanBits;
    const uint32_t sign = std::signbit(x) ? 1u << (ExpBits + ManBits) : 0u;
    const double a = std::fabs(x);
    if (a == 0.0) return sign;
    if (std::isinf(a)) return FiniteOnly ? (sign | nanBits) : (sign | (expMask << ManBits));
    int e;
    std::frexp(a, &e);
    int exponent = std::max(e - 1, minExp);  // a in [2^exponent, 2^(exponent+1)) unless subnormal
    double q = std::nearbyint(std::ldexp(a, ManBits - exponent));  // default rounding mode: even
    if (q >= std::ldexp(1.0, ManBits + 1)) {
      q /= 2;
      ++exponent;
    }
    const auto significand = static_cast<uint32_t>(q);
    const bool subnormal = significand < (1u << ManBits);
    const uint32_t field = subnormal ? 0u : static_cast<uint32_t>(exponent + bias);
    const uint32_t mantissa = significand & manMask;
    const bool overflow =
        FiniteOnly ? (field > expMask || (field == expMask && mantissa == manMask)) : field >= expMask;
    if (overflow) return FiniteOnly ? (sign | nanBits) : (sign | (expMask << ManBits));
    return sign | (field << ManBits) | mantissa;
  }

  static double ulp(double x) {
    int e;
    std::frexp(std::fabs(x), &e);
    return std::ldexp(1.0, std::max(e - 1, minExp) - ManBits);
  }
};

template <typename Format, typename T, loomDataType_t Type>
struct MiniFloatCodec {
  using Storage = T;
  static constexpr loomDataType_t type = Type;
  static T encode(double v) { return static_cast<T>(Format::encode(v)); }
  static double decode(T x) { return Format::decode(x); }
  static T poison() { return static_cast<T>(Format::nanBits); }
  static double ulp(double x) { return Format::ulp(x); }
};

template <typename T, loomDataType_t Type, typename Format>
struct NativeFloatCodec {
  using Storage = T;
  static constexpr loomDataType_t type = Type;
  static T encode(double v) { return static_cast<T>(v); }
  static double decode(T x) { return static_cast<double>(x); }
  static T poison() { return std::numeric_limits<T>::quiet_NaN(); }
  static double ulp(double x) { return Format::ulp(x); }
};

using HalfFormat = MiniFloatFormat<5, 10, false>;
using Bfloat16Format = MiniFloatFormat<8, 7, false>;
using Fp8e4m3Format = MiniFloatFormat<4, 3, true>;
using Fp8e5m2Format = MiniFloatFormat<5, 2, false>;

// Calls f(Codec{}) with the codec of `type`.
template <typename F>
decltype(auto) visitCodec(loomDataType_t type, F&& f) {
  switch (type) {
    case loomInt8:
      return f(IntCodec<int8_t, loomInt8>{});
    case loomUint8:
      return f(IntCodec<uint8_t, loomUint8>{});
    case loomInt32:
      return f(IntCodec<int32_t, loomInt32>{});
    case loomUint32:
      return f(IntCodec<uint32_t, loomUint32>{});
    case loomInt64:
      return f(IntCodec<int64_t, loomInt64>{});
    case loomUint64:
      return f(IntCodec<uint64_t, loomUint64>{});
    case loomFloat16:
      return f(MiniFloatCodec<HalfFormat, uint16_t, loomFloat16>{});
    case loomFloat32:
      return f(NativeFloatCodec<float, loomFloat32, MiniFloatFormat<8, 23, false>>{});
    case loomFloat64:
      return f(NativeFloatCodec<double, loomFloat64, MiniFloatFormat<11, 52, false>>{});
    case loomBfloat16:
      return f(MiniFloatCodec<Bfloat16Format, uint16_t, loomBfloat16>{});
    case loomFloat8e4m3:
      return f(MiniFloatCodec<Fp8e4m3Format, uint8_t, loomFloat8e4m3>{});
    case loomFloat8e5m2:
      return f(MiniFloatCodec<Fp8e5m2Format, uint8_t, loomFloat8e5m2>{});
    default:
      break;
  }
  throw std::invalid_argument("unknown loom data type");
}

}  // namespace loomperf
