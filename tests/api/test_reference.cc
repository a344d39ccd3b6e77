// Self-checks of the tests' reference model (no Loom calls): encodings against known values and
// round trips, and the claim that every input design keeps partial results exact.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "reference.h"

namespace loomtest {
namespace {

double decodeBits(loomDataType_t dt, uint64_t bits) {
  uint8_t buf[8] = {};
  storeBits(dt, bits, buf);
  return decodeFloat(dt, buf);
}

TEST(Reference, KnownEncodings) {
  EXPECT_EQ(decodeBits(loomFloat16, 0x3C00), 1.0);
  EXPECT_EQ(decodeBits(loomFloat16, 0xC000), -2.0);
  EXPECT_EQ(decodeBits(loomFloat16, 0x7BFF), 65504.0);
  EXPECT_EQ(decodeBits(loomFloat16, 0x0001), std::ldexp(1.0, -24));
  EXPECT_TRUE(std::isinf(decodeBits(loomFloat16, 0x7C00)));
  EXPECT_EQ(decodeBits(loomBfloat16, 0x3F80), 1.0);
  EXPECT_EQ(decodeBits(loomBfloat16, 0xC2F7), -123.5);
  EXPECT_EQ(decodeBits(loomFloat8e4m3, 0x7E), 448.0);
  EXPECT_EQ(decodeBits(loomFloat8e4m3, 0x38), 1.0);
  EXPECT_EQ(decodeBits(loomFloat8e4m3, 0x01), std::ldexp(1.0, -9));
  EXPECT_TRUE(std::isnan(decodeBits(loomFloat8e4m3, 0x7F)));
  EXPECT_EQ(decodeBits(loomFloat8e4m3, 0x78), 256.0);  // e4m3 has no infinity
  EXPECT_EQ(decodeBits(loomFloat8e5m2, 0x7B), 57344.0);
  EXPECT_EQ(decodeBits(loomFloat8e5m2, 0x3C), 1.0);
  EXPECT_EQ(decodeBits(loomFloat8e5m2, 0x01), std::ldexp(1.0, -16));
  EXPECT_TRUE(std::isinf(decodeBits(loomFloat8e5m2, 0x7C)));
}

TEST(Reference, EncodeDecodeRoundTrip) {
  for (loomDataType_t dt : {loomFloat16, loomBfloat16, loomFloat8e4m3, loomFloat8e5m2}) {
    uint64_t codes = dtypeSize(dt) == 1 ? 256 : 65536;
    for (uint64_t bits = 0; bits < codes; ++bits) {
      double v = decodeBits(dt, bits);
      if (!std::isfinite(v)) continue;
      uint8_t out[8] = {};
      ASSERT_TRUE(encodeExactFloat(dt, v, out)) << dtypeName(dt) << " code " << bits;
      // -0 and +0 differ in bits; everything else must round-trip exactly.
      ASSERT_EQ(loadBits(dt, out), bits) << dtypeName(dt) << " value " << v;
    }
  }
  uint8_t out[8];
  EXPECT_FALSE(encodeExactFloat(loomFloat8e4m3, 17.0, out));
  EXPECT_FALSE(encodeExactFloat(loomFloat8e4m3, 480.0, out));
  EXPECT_FALSE(encodeExactFloat(loomFloat16, 2049.0, out));
  EXPECT_FALSE(encodeExactFloat(loomBfloat16, 257.0, out));
}

// Partial sums in any order of the chosen inputs are exact: ascending, descending and pairwise.
TEST(Reference, FloatInputsKeepPartialResultsExact) {
  const size_t count = 2000;
  for (loomDataType_t dt : kAllDtypes) {
    if (!isFloat(dt)) continue;
    const size_t es = dtypeSize(dt);
    for (Op op : kAllOps) {
      for (int n = 1; n <= 8; ++n) {
        ReduceInputs in{dt, op, n, 12345};
        std::vector<std::vector<double>> vals(n, std::vector<double>(count));
        std::vector<uint8_t> buf(count * es);
        for (int r = 0; r < n; ++r) {
          fillReduceInput(in, r, 0, count, buf.data());  // aborts if an input is not representable
          for (size_t i = 0; i < count; ++i) {
            vals[r][i] = decodeFloat(dt, buf.data() + i * es);
            uint8_t again[8] = {};  // the fast encoder agrees with the slow exact one
            ASSERT_TRUE(encodeExactFloat(dt, vals[r][i], again));
            ASSERT_EQ(std::memcmp(again, buf.data() + i * es, es), 0) << dtypeName(dt) << " " << vals[r][i];
          }
        }
        double scale = op == Op::PreMulSum ? 0.5 : (op == Op::Avg && (n & (n - 1)) == 0 ? 1.0 / n : 1.0);
        bool checkPartials = !(op == Op::Avg && (n & (n - 1)) != 0);
        if (op == Op::Max || op == Op::Min) continue;  // no arithmetic
        for (size_t i = 0; i < count && checkPartials; ++i) {
          auto exact = [&](double v) {
            uint8_t tmp[8];
            return encodeExactFloat(dt, v, tmp);
          };
          for (int dir = 0; dir < 2; ++dir) {
            double acc = op == Op::Prod ? 1.0 : 0.0;
            for (int k = 0; k < n; ++k) {
              double v = vals[dir ? n - 1 - k : k][i];
              if (op == Op::Prod)
                acc *= v;
              else
                acc += v * scale;
              ASSERT_TRUE(exact(acc)) << dtypeName(dt) << " " << opName(op) << " n=" << n << " i=" << i
                                      << " partial " << acc;
            }
          }
          // Pairwise (tree) partials.
          std::vector<double> level;
          for (int r = 0; r < n; ++r) level.push_back(op == Op::Prod ? vals[r][i] : vals[r][i] * scale);
          while (level.size() > 1) {
            std::vector<double> next;
            for (size_t k = 0; k + 1 < level.size(); k += 2) {
              double v = op == Op::Prod ? level[k] * level[k + 1] : level[k] + level[k + 1];
              ASSERT_TRUE(exact(v)) << dtypeName(dt) << " " << opName(op) << " n=" << n << " tree partial " << v;
              next.push_back(v);
            }
            if (level.size() % 2) next.push_back(level.back());
            level = next;
          }
        }
      }
    }
  }
}

// The model's own results on a small hand-made case.
TEST(Reference, IntegerResultsWrapAndAvgTruncates) {
  for (loomDataType_t dt : {loomInt8, loomUint8, loomInt32, loomUint64}) {
    for (Op op : kAllOps) {
      ReduceInputs in{dt, op, 3, 99};
      const size_t es = dtypeSize(dt);
      std::vector<uint8_t> a(es * 50), b(es * 50), c(es * 50), result(es * 50);
      fillReduceInput(in, 0, 0, 50, a.data());
      fillReduceInput(in, 1, 0, 50, b.data());
      fillReduceInput(in, 2, 0, 50, c.data());
      // Recompute the reduction here with plain C++ on the concrete type.
      for (size_t i = 0; i < 50; ++i) {
        auto calc = [&](auto zero) {
          using T = decltype(zero);
          T x, y, z;
          std::memcpy(&x, a.data() + i * es, es);
          std::memcpy(&y, b.data() + i * es, es);
          std::memcpy(&z, c.data() + i * es, es);
          using U = std::make_unsigned_t<T>;
          T r;
          switch (op) {
            case Op::Sum: r = static_cast<T>(static_cast<U>(static_cast<U>(x) + static_cast<U>(y)) + static_cast<U>(z)); break;
            case Op::Prod: r = static_cast<T>(static_cast<U>(static_cast<U>(x) * static_cast<U>(y)) * static_cast<U>(z)); break;
            case Op::Max: r = std::max({x, y, z}); break;
            case Op::Min: r = std::min({x, y, z}); break;
            case Op::Avg: r = static_cast<T>((static_cast<__int128>(x) + y + z) / 3); break;
            default: {
              U s = std::is_signed_v<T> ? static_cast<U>(-3) : 3;
              r = static_cast<T>(static_cast<U>(static_cast<U>(static_cast<U>(x) + static_cast<U>(y)) + static_cast<U>(z)) * s);
            }
          }
          std::memcpy(result.data() + i * es, &r, es);
        };
        switch (dt) {
          case loomInt8: calc(int8_t{}); break;
          case loomUint8: calc(uint8_t{}); break;
          case loomInt32: calc(int32_t{}); break;
          default: calc(uint64_t{}); break;
        }
      }
      EXPECT_EQ(checkReduced(in, 0, 50, result.data()), "") << dtypeName(dt) << " " << opName(op);
    }
  }
}

}  // namespace
}  // namespace loomtest
