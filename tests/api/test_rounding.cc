// 16- and 8-bit floats reduce in float32 and round to nearest even. With two ranks every output
// element is one operation on two inputs, so its value is fixed: RNE(a op b). Inputs are drawn so
// that a op b is exact in float32 (exponents within 2^10 of each other, no float32 underflow) and
// within the format's range; about half of the sums of same-exponent pairs are exact ties.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "buffers.h"
#include "harness.h"
#include "reference.h"

namespace loomtest {
namespace {

constexpr loomDataType_t kNarrow[] = {loomFloat16, loomBfloat16, loomFloat8e4m3, loomFloat8e5m2};
constexpr Op kRoundedOps[] = {Op::Sum, Op::Prod, Op::Avg, Op::Max, Op::Min};

double exact(Op op, double a, double b) {
  switch (op) {
    case Op::Sum: return a + b;
    case Op::Prod: return a * b;
    case Op::Avg: return (a + b) / 2;
    case Op::Max: return std::max(a, b);
    default: return std::min(a, b);
  }
}

// Inputs of both ranks for `count` elements (rank r's values are pairs[r]).
struct Pairs {
  std::vector<uint8_t> bytes[2];
};

Pairs makePairs(loomDataType_t dt, Op op, size_t count, uint64_t seed) {
  const size_t es = dtypeSize(dt);
  Pairs p;
  p.bytes[0].resize(count * es);
  p.bytes[1].resize(count * es);
  const double minNormal = dt == loomFloat16 ? std::ldexp(1.0, -14)
                           : dt == loomBfloat16 ? std::ldexp(1.0, -126)
                           : dt == loomFloat8e4m3 ? std::ldexp(1.0, -6)
                                                  : std::ldexp(1.0, -14);
  uint64_t h = seed;
  for (size_t i = 0; i < count; ++i) {
    for (;;) {
      h = mix64(h);
      uint8_t ca[8], cb[8];
      storeBits(dt, h & 0xFFFF, ca);
      storeBits(dt, (h >> 16) & 0xFFFF, cb);
      double a = decodeFloat(dt, ca), b = decodeFloat(dt, cb);
      if (!std::isfinite(a) || !std::isfinite(b)) continue;
      int ea = 0, eb = 0;
      std::frexp(a, &ea);
      std::frexp(b, &eb);
      if (a != 0 && b != 0 && std::abs(ea - eb) > 10) continue;  // a + b exact in float32
      if (std::abs(ea) > 30 || std::abs(eb) > 30) continue;       // a * b exact in float32
      if (std::fabs(exact(op, a, b)) > maxFinite(dt)) continue;
      // Avg may be computed as a/2 + b/2: keep the halves exact (normal) so either way is one rounding.
      if (op == Op::Avg && ((a != 0 && std::fabs(a) < 2 * minNormal) || (b != 0 && std::fabs(b) < 2 * minNormal)))
        continue;
      std::memcpy(p.bytes[0].data() + i * es, ca, es);
      std::memcpy(p.bytes[1].data() + i * es, cb, es);
      break;
    }
  }
  return p;
}

std::string checkRounded(loomDataType_t dt, Op op, const Pairs& p, size_t first, size_t count, const uint8_t* got,
                         const std::string& what) {
  const size_t es = dtypeSize(dt);
  size_t bad = 0, firstBad = 0;
  std::string detail;
  for (size_t i = 0; i < count; ++i) {
    double a = decodeFloat(dt, p.bytes[0].data() + (first + i) * es);
    double b = decodeFloat(dt, p.bytes[1].data() + (first + i) * es);
    uint8_t want[8] = {};
    roundNearestEven(dt, exact(op, a, b), want);
    double w = decodeFloat(dt, want), g = decodeFloat(dt, got + i * es);
    if (g == w) continue;  // ±0 compare equal
    if (bad++ == 0) {
      firstBad = i;
      char buf[256];
      std::snprintf(buf, sizeof buf, "a=%.9g b=%.9g exact=%.17g: got %s, expected %s", a, b, exact(op, a, b),
                    formatElement(dt, got + i * es).c_str(), formatElement(dt, want).c_str());
      detail = buf;
    }
  }
  if (bad == 0) return "";
  return what + " " + dtypeName(dt) + " " + opName(op) + ": [" + std::to_string(firstBad) + "] " + detail + " (" +
         std::to_string(bad) + " of " + std::to_string(count) + " wrong); ";
}

std::string roundingBody(RankContext& ctx) {
  if (ctx.nranks != 2) return "needs 2 ranks";
  loomComm_t comm = ctx.comm;
  const size_t count = 4099;
  std::string out;
  for (loomDataType_t dt : kNarrow) {
    const size_t es = dtypeSize(dt);
    for (Op op : kRoundedOps) {
      ctx.note(std::string("rounding ") + dtypeName(dt) + " " + opName(op));
      const uint64_t seed = mix64(dt * 100 + static_cast<int>(op));
      // AllReduce and Reduce (root 1) over count elements; ReduceScatter over 2 * count.
      Pairs p = makePairs(dt, op, 2 * count, seed);
      const uint8_t* mine = p.bytes[ctx.rank].data();
      GuardedBuffer ar(count * es), red(count * es), rs(count * es);
      LT_CALL(comm, loomAllReduce(mine, ar.data(), count, dt, builtinOp(op), comm, nullptr));
      LT_CALL(comm, loomReduce(mine, red.data(), count, dt, builtinOp(op), 1, comm, nullptr));
      LT_CALL(comm, loomReduceScatter(mine, rs.data(), count, dt, builtinOp(op), comm, nullptr));
      out += checkRounded(dt, op, p, 0, count, ar.data(), "AllReduce");
      if (ctx.rank == 1) out += checkRounded(dt, op, p, 0, count, red.data(), "Reduce");
      out += checkRounded(dt, op, p, ctx.rank * count, count, rs.data(), "ReduceScatter");
    }
  }
  return out;
}

class Rounding : public ::testing::TestWithParam<const char*> {};

TEST_P(Rounding, NarrowFloatsRoundToNearestEven) {
  RunOptions options;
  options.transport = GetParam();
  options.timeoutSec = 300;
  std::string failures = runRanks(Launch::Threads, 2, options, roundingBody);
  EXPECT_TRUE(failures.empty()) << "LOOM_TRANSPORT=" << GetParam() << "\n" << failures;
}

INSTANTIATE_TEST_SUITE_P(Transports, Rounding, ::testing::Values("", "socket"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(*info.param ? info.param : "default");
                         });

TEST(RoundingReference, TiesGoToEven) {
  uint8_t out[8];
  ASSERT_TRUE(roundNearestEven(loomFloat16, 2049.0, out));  // between 2048 (even) and 2050
  EXPECT_EQ(decodeFloat(loomFloat16, out), 2048.0);
  ASSERT_TRUE(roundNearestEven(loomFloat16, 2051.0, out));  // between 2050 and 2052 (even)
  EXPECT_EQ(decodeFloat(loomFloat16, out), 2052.0);
  ASSERT_TRUE(roundNearestEven(loomFloat8e4m3, 17.0, out));
  EXPECT_EQ(decodeFloat(loomFloat8e4m3, out), 16.0);
  ASSERT_TRUE(roundNearestEven(loomFloat8e4m3, 19.0, out));
  EXPECT_EQ(decodeFloat(loomFloat8e4m3, out), 20.0);
  ASSERT_TRUE(roundNearestEven(loomFloat8e5m2, -9.0, out));
  EXPECT_EQ(decodeFloat(loomFloat8e5m2, out), -8.0);
  ASSERT_TRUE(roundNearestEven(loomBfloat16, 257.0, out));
  EXPECT_EQ(decodeFloat(loomBfloat16, out), 256.0);
  ASSERT_TRUE(roundNearestEven(loomFloat16, std::ldexp(1.0, -25), out));  // half of the smallest subnormal
  EXPECT_EQ(decodeFloat(loomFloat16, out), 0.0);
  EXPECT_FALSE(roundNearestEven(loomFloat8e4m3, 500.0, out));
}

}  // namespace
}  // namespace loomtest
