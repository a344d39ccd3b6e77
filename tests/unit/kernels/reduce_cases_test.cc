// Hand-written cases with their answers spelled out: integer wrap-around, Avg's truncating quotient of
// negative sums, NaN propagation through Max/Min, narrow floats rounded once after the post-operation.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cpu/float_convert.h"
#include "kernels/cpu/reduce.h"

namespace {

using loom::PostOpKind;
using loom::ReduceKind;
using loom::ReduceOp;

constexpr ReduceOp kSum{};
constexpr ReduceOp kProd{ReduceKind::Prod};
constexpr ReduceOp kMax{ReduceKind::Max};
constexpr ReduceOp kMin{ReduceKind::Min};

ReduceOp avg(uint64_t divisor) { return {ReduceKind::Sum, PostOpKind::Divide, divisor}; }
ReduceOp preMul(double scalar, int64_t intScalar) {
  return {ReduceKind::Sum, PostOpKind::Multiply, 1, scalar, intScalar};
}

template <class T>
std::vector<T> reduce(std::vector<T> a, const std::vector<T>& b, loomDataType_t dtype, const ReduceOp& op,
                      bool finalize = true) {
  loom::reduceArrays(a.data(), a.data(), b.data(), a.size(), dtype, op, finalize);  // in place
  return a;
}

TEST(ReduceCases, IntegerSumWraps) {
  EXPECT_EQ(reduce<int8_t>({127, -128, -1}, {1, -1, -128}, loomInt8, kSum),
            (std::vector<int8_t>{-128, 127, 127}));
  EXPECT_EQ(reduce<uint8_t>({255, 200}, {1, 100}, loomUint8, kSum), (std::vector<uint8_t>{0, 44}));
  const int32_t i32max = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(reduce<int32_t>({i32max}, {1}, loomInt32, kSum),
            (std::vector<int32_t>{std::numeric_limits<int32_t>::min()}));
  EXPECT_EQ(reduce<uint32_t>({0xffffffffu}, {2}, loomUint32, kSum), (std::vector<uint32_t>{1}));
  const int64_t i64max = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(reduce<int64_t>({i64max}, {1}, loomInt64, kSum),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::min()}));
  EXPECT_EQ(reduce<uint64_t>({~0ull}, {1}, loomUint64, kSum), (std::vector<uint64_t>{0}));
}

TEST(ReduceCases, IntegerProdWraps) {
  EXPECT_EQ(reduce<int8_t>({16, -128}, {16, -1}, loomInt8, kProd), (std::vector<int8_t>{0, -128}));
  EXPECT_EQ(reduce<uint8_t>({16, 15}, {17, 17}, loomUint8, kProd), (std::vector<uint8_t>{16, 255}));
  EXPECT_EQ(reduce<int32_t>({65536, -65536}, {65536, 32768}, loomInt32, kProd),
            (std::vector<int32_t>{0, std::numeric_limits<int32_t>::min()}));
  const int64_t i64min = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(reduce<int64_t>({i64min, 1ll << 32}, {-1, 1ll << 32}, loomInt64, kProd),
            (std::vector<int64_t>{i64min, 0}));
  EXPECT_EQ(reduce<uint64_t>({~0ull}, {~0ull}, loomUint64, kProd), (std::vector<uint64_t>{1}));
}

TEST(ReduceCases, IntegerMaxMinAreSigned) {
  EXPECT_EQ(reduce<int8_t>({-1, 5}, {1, -5}, loomInt8, kMax), (std::vector<int8_t>{1, 5}));
  EXPECT_EQ(reduce<uint8_t>({255, 0}, {1, 7}, loomUint8, kMin), (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(reduce<int64_t>({std::numeric_limits<int64_t>::min()}, {0}, loomInt64, kMin),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::min()}));
}

TEST(ReduceCases, AvgOfIntegersIsTruncatedQuotient) {
  // -7 / 2 = -3 (toward zero, not -4); 7 / 2 = 3; -1 / 4 = 0.
  EXPECT_EQ(reduce<int32_t>({-7, 7, -1}, {0, 0, 0}, loomInt32, avg(2)), (std::vector<int32_t>{-3, 3, 0}));
  EXPECT_EQ(reduce<int32_t>({-4, -6}, {-4, 1}, loomInt32, avg(3)), (std::vector<int32_t>{-2, -1}));
  // The quotient is of the wrapped sum: 100 + 100 = -56 in int8, -56 / 3 = -18.
  EXPECT_EQ(reduce<int8_t>({100, -100}, {100, -100}, loomInt8, avg(3)), (std::vector<int8_t>{-18, 18}));
  EXPECT_EQ(reduce<uint8_t>({200}, {100}, loomUint8, avg(3)), (std::vector<uint8_t>{14}));
  EXPECT_EQ(reduce<int64_t>({std::numeric_limits<int64_t>::min()}, {-1}, loomInt64, avg(2)),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::max() / 2}));  // wrapped to INT64_MAX first
  EXPECT_EQ(reduce<uint64_t>({~0ull}, {0}, loomUint64, avg(16)), (std::vector<uint64_t>{~0ull >> 4}));
}

// Every int8/uint8 value and the int32/uint32 extremes over awkward divisors, against C++ division.
template <class T>
void expectAvgQuotients(loomDataType_t dtype, const std::vector<T>& values) {
  for (uint64_t divisor :
       {1ull, 2ull, 3ull, 7ull, 127ull, 128ull, 255ull, 256ull, 65537ull, 0x7fffffffull, 0x80000000ull,
        0xffffffffull, 0x100000001ull, 1ull << 53, (1ull << 53) + 1, (1ull << 63) + 1, ~0ull}) {
    const std::vector<T> zeros(values.size(), T(0));
    const std::vector<T> got = reduce<T>(values, zeros, dtype, avg(divisor));
    for (size_t i = 0; i < values.size(); ++i) {
      const __int128 want = __int128(values[i]) / __int128(divisor);
      ASSERT_EQ(__int128(got[i]), want) << "dtype " << dtype << " " << int64_t(values[i]) << " / " << divisor;
    }
  }
}

TEST(ReduceCases, AvgOfSmallIntegersIsExactForEveryDivisor) {
  std::vector<int8_t> i8;
  std::vector<uint8_t> u8;
  for (int v = 0; v < 256; ++v) i8.push_back(int8_t(v - 128)), u8.push_back(uint8_t(v));
  expectAvgQuotients<int8_t>(loomInt8, i8);
  expectAvgQuotients<uint8_t>(loomUint8, u8);
  std::vector<int32_t> i32;
  std::vector<uint32_t> u32;
  for (int64_t v : {0ll, 1ll, 2ll, 3ll, 6ll, 7ll, 65536ll, 65537ll, 0x7ffffffell, 0x7fffffffll}) {
    i32.push_back(int32_t(v)), i32.push_back(int32_t(-v));
    u32.push_back(uint32_t(v)), u32.push_back(uint32_t(0xffffffffu - uint32_t(v)));
  }
  i32.push_back(std::numeric_limits<int32_t>::min());
  expectAvgQuotients<int32_t>(loomInt32, i32);
  expectAvgQuotients<uint32_t>(loomUint32, u32);
}

TEST(ReduceCases, PreMulSumOfIntegersWraps) {
  EXPECT_EQ(reduce<int8_t>({60}, {4}, loomInt8, preMul(0, 3)), (std::vector<int8_t>{-64}));
  EXPECT_EQ(reduce<uint32_t>({1}, {1}, loomUint32, preMul(0, -1)), (std::vector<uint32_t>{0xfffffffeu}));
}

TEST(ReduceCases, NoPostOperationWithoutFinalize) {
  EXPECT_EQ(reduce<int32_t>({-7}, {0}, loomInt32, avg(2), false), (std::vector<int32_t>{-7}));
  EXPECT_EQ(reduce<float>({1.0f}, {2.0f}, loomFloat32, preMul(10, 10), false), (std::vector<float>{3.0f}));
}

TEST(ReduceCases, FloatPostOperations) {
  EXPECT_EQ(reduce<float>({1.0f, -4.0f}, {2.0f, 1.0f}, loomFloat32, avg(3)),
            (std::vector<float>{1.0f, -1.0f}));
  EXPECT_EQ(reduce<double>({1.0}, {0.0}, loomFloat64, avg(3)), (std::vector<double>{1.0 / 3.0}));
  EXPECT_EQ(reduce<float>({1.0f}, {0.0f}, loomFloat32, avg(3)), (std::vector<float>{1.0f / 3.0f}));
  EXPECT_EQ(reduce<float>({1.0f}, {0.0f}, loomFloat32, preMul(0.1, 0)), (std::vector<float>{0.1f}));
  EXPECT_EQ(reduce<double>({1.0}, {0.0}, loomFloat64, preMul(0.1, 0)), (std::vector<double>{0.1}));
}

// The sum is post-processed while still in float32 and rounded to the narrow type once: in half,
// 2048 + 1 = 2049 and 2049 / 3 = 683 exactly, whereas rounding the sum first (2049 -> 2048, ties to even)
// would give 2048 / 3 -> 682.5.
TEST(ReduceCases, NarrowFloatsRoundOnceAfterPostOperation) {
  std::vector<uint16_t> a{loom::floatToHalf(2048.0f)}, b{loom::floatToHalf(1.0f)};
  loom::reduceArrays(a.data(), a.data(), b.data(), 1, loomFloat16, avg(3), true);
  EXPECT_EQ(loom::halfToFloat(a[0]), 683.0f);
}

template <class T>
void expectNanPropagates(loomDataType_t dtype, T nan, T one, bool (*isNan)(T)) {
  for (const ReduceOp& op : {kMax, kMin}) {
    std::vector<T> a{nan, one, nan}, b{one, nan, nan};
    loom::reduceArrays(a.data(), a.data(), b.data(), a.size(), dtype, op, false);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(isNan(a[i])) << "dtype " << dtype << " element " << i;
  }
}

TEST(ReduceCases, MaxMinPropagateNan) {
  expectNanPropagates<float>(loomFloat32, NAN, 1.0f, [](float v) { return std::isnan(v); });
  expectNanPropagates<double>(loomFloat64, NAN, 1.0, [](double v) { return std::isnan(v); });
  expectNanPropagates<uint16_t>(loomFloat16, 0x7e00, 0x3c00,
                                [](uint16_t v) { return std::isnan(loom::halfToFloat(v)); });
  expectNanPropagates<uint16_t>(loomBfloat16, 0x7fc0, 0x3f80,
                                [](uint16_t v) { return std::isnan(loom::bfloat16ToFloat(v)); });
  expectNanPropagates<uint8_t>(loomFloat8e4m3, 0x7f, 0x38,
                               [](uint8_t v) { return std::isnan(loom::fp8e4m3ToFloat(v)); });
  expectNanPropagates<uint8_t>(loomFloat8e5m2, 0x7e, 0x3c,
                               [](uint8_t v) { return std::isnan(loom::fp8e5m2ToFloat(v)); });
}

TEST(ReduceCases, Fp8SaturatesAndHalfOverflowsToInfinity) {
  EXPECT_EQ(reduce<uint8_t>({0x7e}, {0x7e}, loomFloat8e4m3, kSum),
            (std::vector<uint8_t>{0x7e}));  // 896 -> 448
  EXPECT_EQ(reduce<uint8_t>({0x7b}, {0xfb}, loomFloat8e5m2, kProd), (std::vector<uint8_t>{0xfb}));  // -57344
  EXPECT_EQ(reduce<uint8_t>({0x7c}, {0x3c}, loomFloat8e5m2, kSum),
            (std::vector<uint8_t>{0x7b}));  // inf -> max
  EXPECT_EQ(reduce<uint16_t>({0x7bff}, {0x7bff}, loomFloat16, kSum), (std::vector<uint16_t>{0x7c00}));
  EXPECT_EQ(reduce<uint16_t>({0x7f7f}, {0x7f7f}, loomBfloat16, kSum), (std::vector<uint16_t>{0x7f80}));
}

TEST(ReduceCases, DstMayAliasEitherInput) {
  std::vector<float> a(1000), b(1000);
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(i), b[i] = 2.0f * float(i);
  std::vector<float> x = a, y = b;
  loom::reduceArrays(y.data(), x.data(), y.data(), y.size(), loomFloat32, kSum, false);  // dst == b
  for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], 3.0f * float(i));
  loom::reduceArrays(x.data(), x.data(), x.data(), x.size(), loomFloat32, kSum, false);  // all the same
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], 2.0f * float(i));
}

TEST(ReduceCases, CountZeroTouchesNothing) {
  for (int dtype = 0; dtype < loomNumTypes; ++dtype) {
    loom::reduceArrays(nullptr, nullptr, nullptr, 0, loomDataType_t(dtype), avg(3), true);
    loom::copyArray(nullptr, nullptr, 0, loomDataType_t(dtype), avg(3), true);
    loom::copyArray(nullptr, nullptr, 0, loomDataType_t(dtype), kSum, false);
  }
}

}  // namespace
