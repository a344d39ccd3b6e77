// Conversions between float32 and the narrow float formats, bit-exact with IEEE 754 / cuda_fp8.h:
// round to nearest even, subnormals kept, NaN kept as NaN; fp8 saturates to the largest finite value.
#pragma once

#include <cstdint>

namespace loom {

float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bfloat16ToFloat(uint16_t b);
uint16_t floatToBfloat16(float f);
float fp8e4m3ToFloat(uint8_t v);
uint8_t floatToFp8e4m3(float f);
float fp8e5m2ToFloat(uint8_t v);
uint8_t floatToFp8e5m2(float f);

}  // namespace loom
