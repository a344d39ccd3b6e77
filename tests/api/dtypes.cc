#include "dtypes.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <vector>

namespace loomtest {

IntInfo intInfo(loomDataType_t dtype) {
  switch (dtype) {
    case loomInt8: return {8, true};
    case loomUint8: return {8, false};
    case loomInt32: return {32, true};
    case loomUint32: return {32, false};
    case loomInt64: return {64, true};
    case loomUint64: return {64, false};
    default: return {0, false};
  }
}

FloatInfo floatInfo(loomDataType_t dtype) {
  switch (dtype) {
    case loomFloat16: return {5, 10, 15, true};
    case loomFloat32: return {8, 23, 127, true};
    case loomFloat64: return {11, 52, 1023, true};
    case loomBfloat16: return {8, 7, 127, true};
    case loomFloat8e4m3: return {4, 3, 7, false};
    case loomFloat8e5m2: return {5, 2, 15, true};
    default: return {0, 0, 0, true};
  }
}

uint64_t widthMask(int bits) { return bits >= 64 ? ~0ull : ((1ull << bits) - 1); }

int64_t signExtend(uint64_t bits, int width) {
  if (width >= 64) return static_cast<int64_t>(bits);
  uint64_t sign = 1ull << (width - 1);
  bits &= widthMask(width);
  return static_cast<int64_t>((bits ^ sign) - sign);
}

double minSubnormal(loomDataType_t dtype) {
  FloatInfo f = floatInfo(dtype);
  return std::ldexp(1.0, 1 - f.bias - f.manBits);
}

namespace {

// Encodes an exactly representable value through float32's bits (fast path for fill loops).
// Returns false if v is not exact in dtype.
bool encodeFastImpl(loomDataType_t dtype, double v, uint8_t* out) {
  switch (dtype) {
    case loomFloat64: std::memcpy(out, &v, 8); return true;
    case loomFloat32: {
      float f = static_cast<float>(v);
      std::memcpy(out, &f, 4);
      return static_cast<double>(f) == v;
    }
    default: break;
  }
  float f = static_cast<float>(v);
  if (static_cast<double>(f) != v) return false;
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (dtype == loomBfloat16) {
    if (bits & 0xFFFF) return false;
    uint16_t b = static_cast<uint16_t>(bits >> 16);
    std::memcpy(out, &b, 2);
    return true;
  }
  const FloatInfo fi = floatInfo(dtype);
  const uint32_t sign = bits >> 31;
  const int exp = static_cast<int>((bits >> 23) & 0xFF) - 127;
  const uint32_t man = bits & 0x7FFFFF;
  uint32_t code;
  if (f == 0) {
    code = 0;
  } else if (exp + fi.bias >= 1) {
    const int drop = 23 - fi.manBits;
    if (man & ((1u << drop) - 1)) return false;
    const int maxField = (1 << fi.expBits) - 1 - (fi.ieeeSpecials ? 1 : 0);
    if (exp + fi.bias > maxField) return false;
    code = (static_cast<uint32_t>(exp + fi.bias) << fi.manBits) | (man >> drop);
    if (!fi.ieeeSpecials && (code & 0x7F) == 0x7F) return false;  // e4m3's NaN code
  } else {
    // Subnormal in the target: v = m * 2^(1 - bias - manBits).
    double m = std::ldexp(std::fabs(v), fi.bias - 1 + fi.manBits);
    if (m != std::floor(m) || m >= (1u << fi.manBits)) return false;
    code = static_cast<uint32_t>(m);
  }
  code |= sign << (fi.expBits + fi.manBits);
  if (dtypeSize(dtype) == 1) {
    out[0] = static_cast<uint8_t>(code);
  } else {
    uint16_t c = static_cast<uint16_t>(code);
    std::memcpy(out, &c, 2);
  }
  return true;
}

// Decodes every code of the 8- and 16-bit float formats once.
class DecodeTables {
 public:
  DecodeTables() {
    for (loomDataType_t dt : {loomFloat16, loomFloat8e4m3, loomFloat8e5m2}) {
      std::vector<double>& t = table(dt);
      t.resize(dtypeSize(dt) == 1 ? 256 : 65536);
      for (size_t c = 0; c < t.size(); ++c) t[c] = decodeSlow(dt, c);
    }
  }
  double decode(loomDataType_t dt, const uint8_t* p) const {
    switch (dt) {
      case loomFloat64: {
        double d;
        std::memcpy(&d, p, 8);
        return d;
      }
      case loomFloat32: {
        float f;
        std::memcpy(&f, p, 4);
        return f;
      }
      case loomBfloat16: {
        uint16_t b;
        std::memcpy(&b, p, 2);
        uint32_t bits = static_cast<uint32_t>(b) << 16;
        float f;
        std::memcpy(&f, &bits, 4);
        return f;
      }
      case loomFloat16: {
        uint16_t h;
        std::memcpy(&h, p, 2);
        return half_[h];
      }
      case loomFloat8e4m3: return e4m3_[p[0]];
      default: return e5m2_[p[0]];
    }
  }

 private:
  std::vector<double>& table(loomDataType_t dt) {
    return dt == loomFloat16 ? half_ : dt == loomFloat8e4m3 ? e4m3_ : e5m2_;
  }
  static double decodeSlow(loomDataType_t dtype, uint64_t bits) {
    FloatInfo f = floatInfo(dtype);
    int total = 1 + f.expBits + f.manBits;
    bool negative = (bits >> (total - 1)) & 1;
    uint64_t expField = (bits >> f.manBits) & widthMask(f.expBits);
    uint64_t man = bits & widthMask(f.manBits);
    uint64_t expMax = widthMask(f.expBits);
    double v;
    if (f.ieeeSpecials && expField == expMax) {
      v = man ? std::nan("") : INFINITY;
    } else if (!f.ieeeSpecials && expField == expMax && man == widthMask(f.manBits)) {
      v = std::nan("");
    } else if (expField == 0) {
      v = std::ldexp(static_cast<double>(man), 1 - f.bias - f.manBits);
    } else {
      v = std::ldexp(static_cast<double>(man | (1ull << f.manBits)), static_cast<int>(expField) - f.bias - f.manBits);
    }
    return negative ? -v : v;
  }
  std::vector<double> half_, e4m3_, e5m2_;
};

const DecodeTables& decodeTables() {
  static const DecodeTables tables;
  return tables;
}

// The non-negative finite values of a narrow float format, ascending, with their codes.
class SortedValues {
 public:
  explicit SortedValues(loomDataType_t dtype) {
    const uint64_t codes = dtypeSize(dtype) == 1 ? 128 : 32768;  // sign bit clear
    for (uint64_t c = 0; c < codes; ++c) {
      uint8_t buf[2];
      std::memcpy(buf, &c, 2);
      double v = decodeTables().decode(dtype, buf);
      if (std::isfinite(v)) values_.push_back({v, c});
    }
    std::sort(values_.begin(), values_.end());
  }
  const std::vector<std::pair<double, uint64_t>>& values() const { return values_; }

 private:
  std::vector<std::pair<double, uint64_t>> values_;
};

const SortedValues& sortedValues(loomDataType_t dtype) {
  static const SortedValues half(loomFloat16), bf16(loomBfloat16), e4m3(loomFloat8e4m3), e5m2(loomFloat8e5m2);
  switch (dtype) {
    case loomFloat16: return half;
    case loomBfloat16: return bf16;
    case loomFloat8e4m3: return e4m3;
    default: return e5m2;
  }
}

}  // namespace

const char* dtypeName(loomDataType_t dtype) {
  static const char* const names[] = {"int8",    "uint8",  "int32",  "uint32",   "int64",  "uint64",
                                      "float16", "float32", "float64", "bfloat16", "fp8e4m3", "fp8e5m2"};
  int i = static_cast<int>(dtype);
  return i >= 0 && i < 12 ? names[i] : "invalid";
}

size_t dtypeSize(loomDataType_t dtype) {
  switch (dtype) {
    case loomInt8:
    case loomUint8:
    case loomFloat8e4m3:
    case loomFloat8e5m2: return 1;
    case loomFloat16:
    case loomBfloat16: return 2;
    case loomInt32:
    case loomUint32:
    case loomFloat32: return 4;
    case loomInt64:
    case loomUint64:
    case loomFloat64: return 8;
    default: return 0;
  }
}

bool isFloat(loomDataType_t dtype) {
  return dtype == loomFloat16 || dtype == loomFloat32 || dtype == loomFloat64 ||
         dtype == loomBfloat16 || dtype == loomFloat8e4m3 || dtype == loomFloat8e5m2;
}

uint64_t loadBits(loomDataType_t dtype, const void* element) {
  uint64_t v = 0;
  std::memcpy(&v, element, dtypeSize(dtype));  // little-endian host
  return v;
}

void storeBits(loomDataType_t dtype, uint64_t bits, void* element) {
  std::memcpy(element, &bits, dtypeSize(dtype));
}

double decodeFloat(loomDataType_t dtype, const void* element) {
  return decodeTables().decode(dtype, static_cast<const uint8_t*>(element));
}

bool encodeExactFloat(loomDataType_t dtype, double v, void* element) {
  if (dtype == loomFloat32) {
    float f = static_cast<float>(v);
    if (static_cast<double>(f) != v) return false;
    std::memcpy(element, &f, 4);
    return true;
  }
  if (dtype == loomFloat64) {
    std::memcpy(element, &v, 8);
    return true;
  }
  if (!std::isfinite(v)) return false;
  FloatInfo f = floatInfo(dtype);
  int total = 1 + f.expBits + f.manBits;
  uint64_t sign = std::signbit(v) ? (1ull << (total - 1)) : 0;
  double a = std::fabs(v);
  uint64_t bits;
  if (a == 0) {
    bits = sign;
  } else {
    int e;
    std::frexp(a, &e);
    int exponent = e - 1;  // a = 1.m * 2^exponent
    int expField = exponent + f.bias;
    double scaled;
    if (expField >= 1) {
      scaled = std::ldexp(a, f.manBits - exponent);  // in [2^m, 2^(m+1))
      if (scaled != std::floor(scaled)) return false;
      uint64_t man = static_cast<uint64_t>(scaled) - (1ull << f.manBits);
      if (expField > static_cast<int>(widthMask(f.expBits)) - (f.ieeeSpecials ? 1 : 0)) return false;
      if (!f.ieeeSpecials && expField == static_cast<int>(widthMask(f.expBits)) &&
          man == widthMask(f.manBits))
        return false;  // that code is NaN in e4m3
      bits = sign | (static_cast<uint64_t>(expField) << f.manBits) | man;
    } else {
      scaled = std::ldexp(a, f.bias - 1 + f.manBits);
      if (scaled != std::floor(scaled)) return false;
      bits = sign | static_cast<uint64_t>(scaled);
    }
  }
  storeBits(dtype, bits, element);
  return true;
}

double maxFinite(loomDataType_t dtype) {
  switch (dtype) {
    case loomFloat32: return 3.4028234663852886e38;
    case loomFloat64: return 1.7976931348623157e308;
    default: return sortedValues(dtype).values().back().first;
  }
}

bool roundNearestEven(loomDataType_t dtype, double v, void* element) {
  const auto& vals = sortedValues(dtype).values();
  double a = std::fabs(v);
  if (!(a <= vals.back().first)) return false;
  auto hi = std::lower_bound(vals.begin(), vals.end(), std::make_pair(a, uint64_t{0}));
  uint64_t code;
  if (hi->first == a || hi == vals.begin()) {
    code = hi->second;
  } else {
    auto lo = hi - 1;
    double dl = a - lo->first, dh = hi->first - a;
    if (dl < dh)
      code = lo->second;
    else if (dh < dl)
      code = hi->second;
    else
      code = (lo->second & 1) == 0 ? lo->second : hi->second;  // tie: even mantissa
  }
  if (std::signbit(v)) code |= 1ull << (8 * dtypeSize(dtype) - 1);
  storeBits(dtype, code, element);
  return true;
}

std::string formatElement(loomDataType_t dtype, const void* element) {
  std::ostringstream os;
  uint64_t bits = loadBits(dtype, element);
  if (isFloat(dtype)) {
    os.precision(17);
    os << decodeFloat(dtype, element) << " (0x" << std::hex << bits << ")";
  } else {
    IntInfo info = intInfo(dtype);
    if (info.isSigned)
      os << signExtend(bits, info.bits);
    else
      os << bits;
  }
  return os.str();
}

bool encodeExactFloatFast(loomDataType_t dtype, double v, void* element) {
  return encodeFastImpl(dtype, v, static_cast<uint8_t*>(element));
}

}  // namespace loomtest
