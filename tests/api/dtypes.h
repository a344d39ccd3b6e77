// The tests' own model of Loom's element types, written independently of the library: sizes,
// integer widths, the binary layouts of the 16- and 8-bit floats, exact encoding, decoding and
// round-to-nearest-even.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "loom.h"

namespace loomtest {

inline constexpr loomDataType_t kAllDtypes[] = {
    loomInt8,    loomUint8,   loomInt32,   loomUint32,   loomInt64,      loomUint64,
    loomFloat16, loomFloat32, loomFloat64, loomBfloat16, loomFloat8e4m3, loomFloat8e5m2};

const char* dtypeName(loomDataType_t dtype);
size_t dtypeSize(loomDataType_t dtype);
bool isFloat(loomDataType_t dtype);

struct IntInfo {
  int bits;
  bool isSigned;
};
IntInfo intInfo(loomDataType_t dtype);
uint64_t widthMask(int bits);
int64_t signExtend(uint64_t bits, int width);

// A binary float format: 1 sign bit, expBits, manBits. e4m3 is the OCP "FN" variant (no infinity,
// only S.1111.111 is NaN); the others are IEEE-like.
struct FloatInfo {
  int expBits;
  int manBits;
  int bias;
  bool ieeeSpecials;
  // Every integer in [-intLimit, intLimit] is exact: 2^(manBits+1).
  double intLimit() const { return std::ldexp(1.0, manBits + 1); }
};
FloatInfo floatInfo(loomDataType_t dtype);
double minSubnormal(loomDataType_t dtype);
// Largest finite value of a floating dtype.
double maxFinite(loomDataType_t dtype);

// Value of a floating element (half, bfloat16, fp8 decoded bit-exactly).
double decodeFloat(loomDataType_t dtype, const void* element);
// Writes v, which must be exactly representable in dtype; returns false (and writes nothing) if not.
bool encodeExactFloat(loomDataType_t dtype, double v, void* element);
// The same through float32's bits: fast, for fill loops; tested against encodeExactFloat.
bool encodeExactFloatFast(loomDataType_t dtype, double v, void* element);
// Rounds v to the nearest value of a 16- or 8-bit float format, ties to the even code (IEEE
// round-to-nearest-even); returns false if |v| exceeds the format's largest finite value.
bool roundNearestEven(loomDataType_t dtype, double v, void* element);

// Raw bits of an element, zero-extended (little-endian host).
uint64_t loadBits(loomDataType_t dtype, const void* element);
void storeBits(loomDataType_t dtype, uint64_t bits, void* element);
// Human-readable element, e.g. "-3" or "0.25 (0x3400)".
std::string formatElement(loomDataType_t dtype, const void* element);

}  // namespace loomtest
