// Out-of-line entry points for callers outside the kernels; the definitions live in
// float_convert_inline.h so the vectorized block loops use exactly the same arithmetic.
#include "kernels/cpu/float_convert.h"

#include "kernels/cpu/float_convert_inline.h"

namespace loom {

float halfToFloat(uint16_t h) { return fp::halfToFloatInline(h); }
uint16_t floatToHalf(float f) { return fp::floatToHalfInline(f); }
float bfloat16ToFloat(uint16_t b) { return fp::bfloat16ToFloatInline(b); }
uint16_t floatToBfloat16(float f) { return fp::floatToBfloat16Inline(f); }
float fp8e4m3ToFloat(uint8_t v) { return fp::fp8e4m3ToFloatInline(v); }
uint8_t floatToFp8e4m3(float f) { return fp::floatToFp8e4m3Inline(f); }
float fp8e5m2ToFloat(uint8_t v) { return fp::fp8e5m2ToFloatInline(v); }
uint8_t floatToFp8e5m2(float f) { return fp::floatToFp8e5m2Inline(f); }

}  // namespace loom
