// float32 <-> half / bfloat16 / fp8 conversions: exhaustive decoding and round trips, rounding of
// hand-picked values against bit patterns written out here, and a sweep over float32 against the
// value-search model of narrow_reference.h.
#include "kernels/cpu/float_convert.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kernel_variants.h"
#include "kernels/cpu/half_block.h"
#include "narrow_reference.h"

namespace {

using loomtest::NarrowSpec;

float floatOf(uint32_t bits) { return std::bit_cast<float>(bits); }
uint32_t bitsOf(float f) { return std::bit_cast<uint32_t>(f); }

struct Converter {
  const NarrowSpec& spec;
  loomDataType_t dtype;
  float (*decode)(uint32_t);
  uint32_t (*encode)(float);
};

const Converter kConverters[] = {
    {loomtest::kHalfSpec, loomFloat16, [](uint32_t c) { return loom::halfToFloat(uint16_t(c)); },
     [](float f) { return uint32_t(loom::floatToHalf(f)); }},
    {loomtest::kBfloat16Spec, loomBfloat16, [](uint32_t c) { return loom::bfloat16ToFloat(uint16_t(c)); },
     [](float f) { return uint32_t(loom::floatToBfloat16(f)); }},
    {loomtest::kE4m3Spec, loomFloat8e4m3, [](uint32_t c) { return loom::fp8e4m3ToFloat(uint8_t(c)); },
     [](float f) { return uint32_t(loom::floatToFp8e4m3(f)); }},
    {loomtest::kE5m2Spec, loomFloat8e5m2, [](uint32_t c) { return loom::fp8e5m2ToFloat(uint8_t(c)); },
     [](float f) { return uint32_t(loom::floatToFp8e5m2(f)); }},
};

// Every NaN encodes to the format's one canonical NaN, sign and payload dropped, as CUDA does.
uint32_t canonicalNan(const NarrowSpec& s) { return s.mantBits >= 7 ? 0x7fff : 0x7f; }

TEST(FloatConvert, DecodeEveryCodeMatchesDefinition) {
  for (const Converter& c : kConverters) {
    for (uint32_t code = 0; code < loomtest::codeCount(c.spec); ++code) {
      const float got = c.decode(code);
      const double want = loomtest::referenceDecode(c.spec, code);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(got)) << c.spec.name << " code " << code;
        EXPECT_EQ(std::signbit(got), (code & loomtest::signBit(c.spec)) != 0) << c.spec.name << " " << code;
        EXPECT_NE(bitsOf(got) & 0x00400000u, 0u) << "decoded NaN is quiet: " << c.spec.name << " " << code;
      } else {
        ASSERT_EQ(bitsOf(got), bitsOf(float(want))) << c.spec.name << " code " << code;
        ASSERT_EQ(double(got), want) << c.spec.name << " code " << code;
      }
    }
  }
}

// Identity except NaN canonicalisation and e5m2's infinities, which SATFINITE turns into +-57344.
TEST(FloatConvert, RoundTripEveryCode) {
  for (const Converter& c : kConverters) {
    for (uint32_t code = 0; code < loomtest::codeCount(c.spec); ++code) {
      uint32_t want = loomtest::isNanCode(c.spec, code) ? canonicalNan(c.spec) : code;
      if (&c.spec == &loomtest::kE5m2Spec && (code & 0x7f) == 0x7c) want = (code & 0x80) | 0x7b;
      ASSERT_EQ(c.encode(c.decode(code)), want) << c.spec.name << " code 0x" << std::hex << code;
    }
  }
}

TEST(FloatConvert, NanCanonicalisation) {
  EXPECT_EQ(loom::floatToHalf(loom::halfToFloat(0x7c01)), 0x7fff);
  EXPECT_EQ(loom::floatToHalf(loom::halfToFloat(0xfd55)), 0x7fff);
  EXPECT_EQ(loom::floatToBfloat16(loom::bfloat16ToFloat(0x7f81)), 0x7fff);
  EXPECT_EQ(loom::floatToBfloat16(loom::bfloat16ToFloat(0xffc0)), 0x7fff);
  EXPECT_EQ(loom::floatToFp8e5m2(loom::fp8e5m2ToFloat(0x7d)), 0x7f);
  EXPECT_EQ(loom::floatToFp8e5m2(loom::fp8e5m2ToFloat(0xfe)), 0x7f);
  EXPECT_EQ(loom::floatToFp8e4m3(loom::fp8e4m3ToFloat(0xff)), 0x7f);
  // Decoding keeps the sign and payload and makes the NaN quiet.
  EXPECT_EQ(bitsOf(loom::halfToFloat(0xfd55)), 0xffeaa000u);
  EXPECT_EQ(bitsOf(loom::bfloat16ToFloat(0x7f81)), 0x7fc10000u);
  EXPECT_EQ(bitsOf(loom::fp8e4m3ToFloat(0xff)), 0xffc00000u);
}

struct Case {
  uint32_t floatBits;
  uint32_t want;
};

void expectCases(uint32_t (*encode)(float), const char* name, std::initializer_list<Case> cases) {
  for (const Case& c : cases) {
    EXPECT_EQ(encode(floatOf(c.floatBits)), c.want)
        << name << " of float 0x" << std::hex << c.floatBits << " (" << floatOf(c.floatBits) << ")";
  }
}

constexpr uint32_t kInf = 0x7f800000, kNegInf = 0xff800000, kQNan = 0x7fc00000, kNegQNan = 0xffc00000;
constexpr uint32_t kSNan = 0x7f800001;

TEST(FloatConvert, HalfRounding) {
  expectCases(kConverters[0].encode, "half",
              {{bitsOf(1.0f), 0x3c00},
               {bitsOf(-2.0f), 0xc000},
               {0x00000000, 0x0000},
               {0x80000000, 0x8000},
               {bitsOf(1.0f + 0x1p-11f), 0x3c00},             // tie -> even (down)
               {bitsOf(1.0f + 3 * 0x1p-11f), 0x3c02},         // tie -> even (up)
               {bitsOf(1.0f + 0x1p-11f + 0x1p-23f), 0x3c01},  // just above the tie
               {bitsOf(65504.0f), 0x7bff},
               {0x477fefff, 0x7bff},  // just below 65520
               {bitsOf(65520.0f), 0x7c00},
               {bitsOf(-65520.0f), 0xfc00},
               {bitsOf(1e9f), 0x7c00},
               {kInf, 0x7c00},
               {kNegInf, 0xfc00},
               {kQNan, 0x7fff},
               {kNegQNan, 0x7fff},
               {kSNan, 0x7fff},
               {0x7fc02000, 0x7fff},        // canonical NaN, as CUDA
               {bitsOf(0x1p-14f), 0x0400},  // smallest normal
               {bitsOf(0x1p-24f), 0x0001},  // smallest subnormal
               {bitsOf(0x1p-25f), 0x0000},  // half of it: tie -> 0
               {bitsOf(0x1p-25f * 1.5f), 0x0001},
               {bitsOf(3 * 0x1p-25f), 0x0002},         // tie 1|2 -> 2
               {bitsOf(5 * 0x1p-25f), 0x0002},         // tie 2|3 -> 2
               {bitsOf(0x1p-14f - 0x1p-25f), 0x0400},  // tie between largest subnormal and 2^-14
               {bitsOf(-0x1p-24f), 0x8001},
               {bitsOf(1e-10f), 0x0000},
               {bitsOf(-1e-10f), 0x8000},
               {0x00000001, 0x0000}});
}

TEST(FloatConvert, Bfloat16Rounding) {
  expectCases(kConverters[1].encode, "bfloat16",
              {{bitsOf(1.0f), 0x3f80}, {bitsOf(-1.0f), 0xbf80}, {0x80000000, 0x8000},
               {0x3f808000, 0x3f80},  // tie -> even (down)
               {0x3f818000, 0x3f82},  // tie -> even (up)
               {0x3f808001, 0x3f81},   {0x3f807fff, 0x3f80},    {0x7f7f7fff, 0x7f7f},
               {0x7f7f8000, 0x7f80},   {0x7f7fffff, 0x7f80},    {0xff7fffff, 0xff80},
               {kInf, 0x7f80},         {kNegInf, 0xff80},       {kQNan, 0x7fff},
               {kNegQNan, 0x7fff},     {kSNan, 0x7fff},         {0x7f810000, 0x7fff},
               {0x00008000, 0x0000},   {0x00018000, 0x0002},    {0x00010000, 0x0001},
               {0x00008001, 0x0001}});
}

TEST(FloatConvert, Fp8e4m3Rounding) {
  expectCases(kConverters[2].encode, "e4m3",
              {{bitsOf(1.0f), 0x38},
               {bitsOf(-1.0f), 0xb8},
               {0x80000000, 0x80},
               {bitsOf(0.5f), 0x30},
               {bitsOf(1.0625f), 0x38},  // tie 1|1.125 -> even
               {bitsOf(1.1875f), 0x3a},  // tie 1.125|1.25 -> even
               {bitsOf(17.0f), 0x58},    // tie 16|18 -> even
               {bitsOf(416.0f), 0x7d},
               {bitsOf(448.0f), 0x7e},
               {bitsOf(464.0f), 0x7e},  // tie 448|480 -> 448
               {bitsOf(464.5f), 0x7e},
               {bitsOf(480.0f), 0x7e},
               {bitsOf(1e6f), 0x7e},
               {bitsOf(-1e6f), 0xfe},
               {kInf, 0x7e},
               {kNegInf, 0xfe},
               {kQNan, 0x7f},
               {kNegQNan, 0x7f},
               {kSNan, 0x7f},
               {bitsOf(0x1p-6f), 0x08},         // smallest normal
               {bitsOf(0x1p-9f), 0x01},         // smallest subnormal
               {bitsOf(0x1p-10f), 0x00},        // tie -> 0
               {0x3a800001, 0x01},              // just above 2^-10
               {bitsOf(3 * 0x1p-10f), 0x02},    // tie 1|2 -> 2
               {bitsOf(7.5f * 0x1p-9f), 0x08},  // tie 7|8 -> 8
               {bitsOf(-0x1p-10f), 0x80},
               {0x00000001, 0x00}});
}

TEST(FloatConvert, Fp8e5m2Rounding) {
  expectCases(kConverters[3].encode, "e5m2",
              {{bitsOf(1.0f), 0x3c},
               {bitsOf(-1.0f), 0xbc},
               {0x80000000, 0x80},
               {bitsOf(1.125f), 0x3c},  // tie 1|1.25 -> even
               {bitsOf(1.375f), 0x3e},  // tie 1.25|1.5 -> even
               {bitsOf(49152.0f), 0x7a},
               {bitsOf(57344.0f), 0x7b},
               {bitsOf(61439.996f), 0x7b},
               {bitsOf(61440.0f), 0x7b},
               {bitsOf(65536.0f), 0x7b},
               {bitsOf(1e9f), 0x7b},
               {bitsOf(-1e9f), 0xfb},
               {kInf, 0x7b},
               {kNegInf, 0xfb},  // SATFINITE saturates infinities too
               {kQNan, 0x7f},
               {kNegQNan, 0x7f},
               {kSNan, 0x7f},
               {0x7fe00000, 0x7f},
               {0xffe00000, 0x7f},
               {bitsOf(0x1p-14f), 0x04},      // smallest normal
               {bitsOf(0x1p-16f), 0x01},      // smallest subnormal
               {bitsOf(0x1p-17f), 0x00},      // tie -> 0
               {bitsOf(3 * 0x1p-17f), 0x02},  // tie 1|2 -> 2
               {bitsOf(-0x1p-17f), 0x80},
               {0x00000001, 0x00}});
}

// Every float32 on a stride, and around every midpoint between neighbouring codes, against the model.
TEST(FloatConvert, SweepAgainstNearestValueModel) {
  for (const Converter& c : kConverters) {
    const std::vector<double> values = loomtest::positiveValues(c.spec);
    auto check = [&](float f) {
      if (std::isnan(f)) return;
      for (float v : {f, -f}) {
        const uint32_t want = loomtest::referenceEncode(c.spec, values, v);
        ASSERT_EQ(c.encode(v), want) << c.spec.name << " of float 0x" << std::hex << bitsOf(v) << " (" << v
                                     << ")";
      }
    };
    for (uint64_t bits = 0; bits <= 0x7f800000u; bits += 997) check(floatOf(uint32_t(bits)));
    check(std::numeric_limits<float>::infinity());
    for (size_t i = 0; i + 1 < values.size(); ++i) {
      const float mid = float((values[i] + values[i + 1]) / 2);  // exact: one more bit than the format
      ASSERT_EQ(double(mid), (values[i] + values[i + 1]) / 2);
      check(mid);
      check(std::nextafter(mid, 0.0f));
      check(std::nextafter(mid, std::numeric_limits<float>::infinity()));
      check(float(values[i]));
    }
  }
}

// The reduce kernels' vectorized block conversions must give the scalar functions' bits, NaN included.
TEST(FloatConvert, BlockConversionsMatchScalar) {
  constexpr size_t kChunk = 4099;
  std::vector<float> floats(kChunk);
  std::vector<uint8_t> narrow(65536 * 2);  // every half code, or a chunk of encoded floats
  for (const loomtest::KernelVariant& v : loomtest::kernelVariants()) {
    if (v.encode == nullptr) continue;
    for (const Converter& c : kConverters) {
      const size_t width = c.spec.expBits + c.spec.mantBits >= 15 ? 2 : 1;
      const uint32_t codes = loomtest::codeCount(c.spec);
      for (uint32_t code = 0; code < codes; ++code) std::memcpy(&narrow[code * width], &code, width);
      std::vector<float> decoded(codes);
      v.decode(c.dtype, narrow.data(), decoded.data(), codes);
      for (uint32_t code = 0; code < codes; ++code) {
        ASSERT_EQ(bitsOf(decoded[code]), bitsOf(c.decode(code)))
            << v.name << " " << c.spec.name << " " << code;
      }
      uint64_t next = 0;
      while (next <= 0xffffffffu) {
        size_t n = 0;
        for (; n < kChunk && next <= 0xffffffffu; ++n, next += 1009) floats[n] = floatOf(uint32_t(next));
        v.encode(c.dtype, floats.data(), narrow.data(), n);
        for (size_t i = 0; i < n; ++i) {
          uint32_t got = 0;
          std::memcpy(&got, &narrow[i * width], width);
          ASSERT_EQ(got, c.encode(floats[i]))
              << v.name << " " << c.spec.name << " of float 0x" << std::hex << bitsOf(floats[i]);
        }
      }
    }
  }
}

// F16C and the portable code must agree on every half and on floats of every kind, also when the
// application has set flush-to-zero and denormals-are-zero (the conversions must ignore both).
TEST(FloatConvert, HalfF16cMatchesPortable) {
  if (!loom::cpu::cpuHasF16c()) GTEST_SKIP() << "no F16C on this CPU";
  std::vector<uint16_t> codes(65536);
  for (uint32_t c = 0; c < codes.size(); ++c) codes[c] = uint16_t(c);
  std::vector<float> floats;
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 4099) floats.push_back(floatOf(uint32_t(bits)));
  for (uint32_t bits = 0; bits < 0x00100000u; bits += 1)
    floats.push_back(floatOf(0x33000000u + bits * 8));  // around 2^-25
  for (bool flushDenormals : {false, true}) {
#if defined(__x86_64__)
    const unsigned savedCsr = __builtin_ia32_stmxcsr();
    if (flushDenormals) __builtin_ia32_ldmxcsr(savedCsr | 0x8040);  // FTZ | DAZ
#else
    if (flushDenormals) continue;
#endif
    std::vector<float> viaF16c(codes.size()), viaPortable(codes.size());
    loom::cpu::halfToFloatBlockF16c(codes.data(), viaF16c.data(), codes.size());
    loom::cpu::halfToFloatBlockPortable(codes.data(), viaPortable.data(), codes.size());
    std::vector<uint16_t> encF16c(floats.size()), encPortable(floats.size());
    loom::cpu::floatToHalfBlockF16c(floats.data(), encF16c.data(), floats.size());
    loom::cpu::floatToHalfBlockPortable(floats.data(), encPortable.data(), floats.size());
#if defined(__x86_64__)
    __builtin_ia32_ldmxcsr(savedCsr);
#endif
    for (size_t i = 0; i < codes.size(); ++i) {
      ASSERT_EQ(bitsOf(viaF16c[i]), bitsOf(viaPortable[i]))
          << "half 0x" << std::hex << i << " ftz/daz " << flushDenormals;
    }
    for (size_t i = 0; i < floats.size(); ++i) {
      ASSERT_EQ(encF16c[i], encPortable[i])
          << "float 0x" << std::hex << bitsOf(floats[i]) << " ftz/daz " << flushDenormals;
    }
  }
}

}  // namespace
