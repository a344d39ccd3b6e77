// reduceArrays/copyArray against an independent reference: every dtype x operator x count x aliasing,
// for every kernel variant (kernel_variants.h). Floats are computed in double (and rounded to float32
// where the kernel works in float32), integers with exact modular arithmetic; narrow floats are decoded
// with the tests' own model and encoded with the library's conversions (checked in float_convert_test).
#include "kernels/cpu/reduce.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernel_variants.h"
#include "kernels/cpu/float_convert.h"
#include "narrow_reference.h"

namespace {

using loom::PostOpKind;
using loom::ReduceKind;
using loom::ReduceOp;
using loomtest::KernelVariant;

enum class TestOp { Sum, Prod, Max, Min, Avg, PreMulSum };
constexpr TestOp kOps[] = {TestOp::Sum, TestOp::Prod, TestOp::Max,
                           TestOp::Min, TestOp::Avg,  TestOp::PreMulSum};
const char* opName(TestOp op) {
  static const char* const names[] = {"sum", "prod", "max", "min", "avg", "premulsum"};
  return names[int(op)];
}

constexpr uint64_t kDivisor = 3;    // Avg over three ranks: inexact for floats, truncating for ints
constexpr double kScalar = 1.7;     // not exact in float32: the kernel must use float(1.7) there
constexpr int64_t kIntScalar = -3;  // wraps for unsigned types

ReduceOp makeOp(TestOp op) {
  ReduceOp r;
  switch (op) {
    case TestOp::Sum: r.kind = ReduceKind::Sum; break;
    case TestOp::Prod: r.kind = ReduceKind::Prod; break;
    case TestOp::Max: r.kind = ReduceKind::Max; break;
    case TestOp::Min: r.kind = ReduceKind::Min; break;
    case TestOp::Avg:
      r.post = PostOpKind::Divide;
      r.divisor = kDivisor;
      break;
    case TestOp::PreMulSum:
      r.post = PostOpKind::Multiply;
      r.scalar = kScalar;
      r.intScalar = kIntScalar;
      break;
  }
  return r;
}

// ---- Element model ---------------------------------------------------------------------------------

enum class Kind { Signed, Unsigned, Float32, Float64, Narrow };
struct Dtype {
  loomDataType_t dtype;
  const char* name;
  size_t size;
  Kind kind;
  const loomtest::NarrowSpec* spec;  // Narrow only
};
const Dtype kDtypes[] = {
    {loomInt8, "int8", 1, Kind::Signed, nullptr},
    {loomUint8, "uint8", 1, Kind::Unsigned, nullptr},
    {loomInt32, "int32", 4, Kind::Signed, nullptr},
    {loomUint32, "uint32", 4, Kind::Unsigned, nullptr},
    {loomInt64, "int64", 8, Kind::Signed, nullptr},
    {loomUint64, "uint64", 8, Kind::Unsigned, nullptr},
    {loomFloat16, "half", 2, Kind::Narrow, &loomtest::kHalfSpec},
    {loomFloat32, "float32", 4, Kind::Float32, nullptr},
    {loomFloat64, "float64", 8, Kind::Float64, nullptr},
    {loomBfloat16, "bfloat16", 2, Kind::Narrow, &loomtest::kBfloat16Spec},
    {loomFloat8e4m3, "e4m3", 1, Kind::Narrow, &loomtest::kE4m3Spec},
    {loomFloat8e5m2, "e5m2", 1, Kind::Narrow, &loomtest::kE5m2Spec},
};

uint64_t widthMask(const Dtype& t) { return t.size == 8 ? ~0ull : (1ull << (8 * t.size)) - 1; }

uint64_t load(const Dtype& t, const uint8_t* p, size_t i) {
  uint64_t v = 0;
  std::memcpy(&v, p + i * t.size, t.size);  // little-endian
  return v;
}
void store(const Dtype& t, uint8_t* p, size_t i, uint64_t v) { std::memcpy(p + i * t.size, &v, t.size); }

int64_t signExtend(const Dtype& t, uint64_t bits) {
  const int shift = 64 - 8 * int(t.size);
  return int64_t(bits << shift) >> shift;
}

double decodeFloat(const Dtype& t, uint64_t bits) {
  switch (t.kind) {
    case Kind::Float32: return std::bit_cast<float>(uint32_t(bits));
    case Kind::Float64: return std::bit_cast<double>(bits);
    default: return loomtest::referenceDecode(*t.spec, uint32_t(bits));
  }
}

uint64_t encodeFloat(const Dtype& t, double v) {
  switch (t.dtype) {
    case loomFloat32: return std::bit_cast<uint32_t>(float(v));
    case loomFloat64: return std::bit_cast<uint64_t>(v);
    case loomFloat16: return loom::floatToHalf(float(v));
    case loomBfloat16: return loom::floatToBfloat16(float(v));
    case loomFloat8e4m3: return loom::floatToFp8e4m3(float(v));
    default: return loom::floatToFp8e5m2(float(v));
  }
}

// ---- Reference ------------------------------------------------------------------------------------

uint64_t referenceInt(const Dtype& t, TestOp op, uint64_t a, uint64_t b, bool finalize) {
  const bool isSigned = t.kind == Kind::Signed;
  const __int128 x = isSigned ? __int128(signExtend(t, a)) : __int128(a);
  const __int128 y = isSigned ? __int128(signExtend(t, b)) : __int128(b);
  __int128 r;
  switch (op) {
    // In unsigned __int128: two uint64 values can multiply past the signed range (undefined
    // behaviour), and only the low bits, the same either way, are kept.
    case TestOp::Prod: r = __int128(static_cast<unsigned __int128>(x) * static_cast<unsigned __int128>(y)); break;
    case TestOp::Max: r = x > y ? x : y; break;
    case TestOp::Min: r = x < y ? x : y; break;
    default: r = x + y; break;
  }
  uint64_t bits = uint64_t(r) & widthMask(t);  // wrap to the type
  if (finalize && op == TestOp::Avg) {
    const __int128 v = isSigned ? __int128(signExtend(t, bits)) : __int128(bits);
    bits = uint64_t(v / __int128(kDivisor)) & widthMask(t);  // C++ division truncates toward zero
  } else if (finalize && op == TestOp::PreMulSum) {
    const __int128 v = isSigned ? __int128(signExtend(t, bits)) : __int128(bits);
    bits = uint64_t(v * __int128(kIntScalar)) & widthMask(t);
  }
  return bits;
}

// The kernel's compute type: double for float64, float32 for everything narrower.
double roundToCompute(const Dtype& t, double v) { return t.kind == Kind::Float64 ? v : double(float(v)); }

double referencePostValue(const Dtype& t, TestOp op, double r) {
  if (op == TestOp::Avg) return roundToCompute(t, r / double(kDivisor));
  if (op == TestOp::PreMulSum) {
    return roundToCompute(t, r * (t.kind == Kind::Float64 ? kScalar : double(float(kScalar))));
  }
  return r;
}

double referenceFloatValue(const Dtype& t, TestOp op, double x, double y, bool finalize) {
  double r;
  switch (op) {
    case TestOp::Prod: r = x * y; break;
    case TestOp::Max: r = (std::isnan(x) || std::isnan(y)) ? NAN : std::max(x, y); break;
    case TestOp::Min: r = (std::isnan(x) || std::isnan(y)) ? NAN : std::min(x, y); break;
    default: r = x + y; break;
  }
  r = roundToCompute(t, r);
  return finalize ? referencePostValue(t, op, r) : r;
}

uint64_t referenceFloat(const Dtype& t, TestOp op, uint64_t a, uint64_t b, bool finalize) {
  return encodeFloat(t, referenceFloatValue(t, op, decodeFloat(t, a), decodeFloat(t, b), finalize));
}

uint64_t referenceCopy(const Dtype& t, TestOp op, uint64_t src, bool finalize) {
  if (!finalize || (op != TestOp::Avg && op != TestOp::PreMulSum)) return src;
  if (t.kind == Kind::Signed || t.kind == Kind::Unsigned) {
    // The post-operation of x equals that of the sum x + 0.
    return referenceInt(t, op, src, 0, true);
  }
  return encodeFloat(t, referencePostValue(t, op, decodeFloat(t, src)));
}

// Equal, or both NaN, or (Max/Min only) zeros of either sign: which zero Max(-0, +0) gives is unspecified.
bool sameElement(const Dtype& t, TestOp op, uint64_t got, uint64_t want) {
  if (got == want) return true;
  if (t.kind == Kind::Signed || t.kind == Kind::Unsigned) return false;
  const double g = decodeFloat(t, got);
  const double w = decodeFloat(t, want);
  if (std::isnan(g) && std::isnan(w)) return true;
  return (op == TestOp::Max || op == TestOp::Min) && g == 0 && w == 0;
}

// ---- Inputs -----------------------------------------------------------------------------------------

uint64_t randomElement(const Dtype& t, std::mt19937_64& rng) {
  const uint64_t r = rng();
  switch (t.kind) {
    case Kind::Signed:
    case Kind::Unsigned: {
      const uint64_t edges[] = {0, 1, widthMask(t), widthMask(t) >> 1, (widthMask(t) >> 1) + 1};
      return (r % 8 == 0 ? edges[(r >> 8) % 5] : rng()) & widthMask(t);
    }
    case Kind::Narrow: return r & widthMask(t);  // every code, NaN and infinity included
    default: break;
  }
  const bool wide = t.kind == Kind::Float64;
  const double specials[] = {
      0.0,
      -0.0,
      INFINITY,
      -INFINITY,
      NAN,
      -NAN,
      1.0,
      -1.0,
      wide ? std::numeric_limits<double>::max() : std::numeric_limits<float>::max(),
      wide ? std::numeric_limits<double>::denorm_min() : std::numeric_limits<float>::denorm_min(),
      wide ? std::numeric_limits<double>::min() : std::numeric_limits<float>::min()};
  double v;
  switch (r % 10) {
    case 0: v = specials[(r >> 8) % std::size(specials)]; break;
    case 1: return wide ? rng() : rng() & 0xffffffffu;  // any bit pattern
    default: v = std::ldexp(double(int64_t(rng() % 2000001) - 1000000) / 1000.0, int((r >> 8) % 41) - 20);
  }
  return encodeFloat(t, v);
}

// ---- The sweep ---------------------------------------------------------------------------------------

constexpr size_t kCounts[] = {0, 1, 7, 255, 256, 257, 4099};
enum class Alias { None, DstIsA, DstIsB, All };
constexpr Alias kAliases[] = {Alias::None, Alias::DstIsA, Alias::DstIsB, Alias::All};
const char* aliasName(Alias a) {
  static const char* const names[] = {"distinct", "dst==a", "dst==b", "dst==a==b"};
  return names[int(a)];
}

constexpr size_t kGuard = 16;  // elements either side that must stay untouched
constexpr uint8_t kGuardByte = 0xa5;

struct Buffers {
  std::vector<uint8_t> a, b, dst;
  Buffers(size_t bytes) : a(bytes, kGuardByte), b(bytes, kGuardByte), dst(bytes, kGuardByte) {}
};

std::string describe(const KernelVariant& v, const Dtype& t, TestOp op, size_t count, Alias alias,
                     bool finalize) {
  return std::string(v.name) + " " + t.name + " " + opName(op) + " count=" + std::to_string(count) + " " +
         aliasName(alias) + (finalize ? " finalize" : "");
}

void checkReduce(const KernelVariant& v, const Dtype& t, TestOp op, size_t count, Alias alias, bool finalize,
                 std::mt19937_64& rng) {
  const size_t offset = kGuard + (count % 2);  // odd counts also start unaligned
  Buffers buf((count + 2 * kGuard + 1) * t.size);
  std::vector<uint64_t> a(count), b(count);
  for (size_t i = 0; i < count; ++i) {
    a[i] = randomElement(t, rng);
    b[i] = alias == Alias::All ? a[i] : randomElement(t, rng);
    store(t, buf.a.data(), offset + i, a[i]);
    store(t, buf.b.data(), offset + i, b[i]);
  }
  uint8_t* pa = buf.a.data() + offset * t.size;
  uint8_t* pb = buf.b.data() + offset * t.size;
  uint8_t* pd = buf.dst.data() + offset * t.size;
  std::vector<uint8_t>* out = &buf.dst;
  if (alias == Alias::DstIsA || alias == Alias::All) pd = pa, out = &buf.a;
  if (alias == Alias::DstIsB) pd = pb, out = &buf.b;
  if (alias == Alias::All) pb = pa;
  const ReduceOp rop = makeOp(op);
  if (count == 0) {
    v.reduce(nullptr, nullptr, nullptr, 0, t.dtype, rop, finalize);  // must not touch anything
  }
  v.reduce(pd, pa, pb, count, t.dtype, rop, finalize);

  const std::string what = describe(v, t, op, count, alias, finalize);
  const bool isInt = t.kind == Kind::Signed || t.kind == Kind::Unsigned;
  for (size_t i = 0; i < count; ++i) {
    const uint64_t want =
        isInt ? referenceInt(t, op, a[i], b[i], finalize) : referenceFloat(t, op, a[i], b[i], finalize);
    const uint64_t got = load(t, out->data(), offset + i);
    ASSERT_TRUE(sameElement(t, op, got, want))
        << what << ": element " << i << " of 0x" << std::hex << a[i] << " and 0x" << b[i] << " gave 0x" << got
        << ", want 0x" << want;
  }
  for (size_t i = 0; i < offset * t.size; ++i)
    ASSERT_EQ((*out)[i], kGuardByte) << what << ": wrote before dst";
  for (size_t i = (offset + count) * t.size; i < out->size(); ++i) {
    ASSERT_EQ((*out)[i], kGuardByte) << what << ": wrote past dst";
  }
}

void checkCopy(const KernelVariant& v, const Dtype& t, TestOp op, size_t count, bool inPlace, bool finalize,
               std::mt19937_64& rng) {
  Buffers buf((count + 2 * kGuard) * t.size);
  std::vector<uint64_t> src(count);
  for (size_t i = 0; i < count; ++i) {
    src[i] = randomElement(t, rng);
    store(t, buf.a.data(), kGuard + i, src[i]);
  }
  std::vector<uint8_t>& out = inPlace ? buf.a : buf.dst;
  v.copy(out.data() + kGuard * t.size, buf.a.data() + kGuard * t.size, count, t.dtype, makeOp(op), finalize);
  const std::string what =
      describe(v, t, op, count, inPlace ? Alias::DstIsA : Alias::None, finalize) + " copy";
  for (size_t i = 0; i < count; ++i) {
    const uint64_t want = referenceCopy(t, op, src[i], finalize);
    const uint64_t got = load(t, out.data(), kGuard + i);
    // Without a post-operation a copy moves bits, NaN payloads included.
    const bool ok = (finalize && (op == TestOp::Avg || op == TestOp::PreMulSum))
                        ? sameElement(t, op, got, want)
                        : got == want;
    ASSERT_TRUE(ok) << what << ": element " << i << " of 0x" << std::hex << src[i] << " gave 0x" << got
                    << ", want 0x" << want;
  }
  for (size_t i = 0; i < kGuard * t.size; ++i) ASSERT_EQ(out[i], kGuardByte) << what;
  for (size_t i = (kGuard + count) * t.size; i < out.size(); ++i) ASSERT_EQ(out[i], kGuardByte) << what;
}

TEST(Reduce, EveryDtypeOpCountAndAliasing) {
  std::mt19937_64 rng(12345);
  for (const KernelVariant& v : loomtest::kernelVariants()) {
    for (const Dtype& t : kDtypes) {
      for (TestOp op : kOps) {
        for (size_t count : kCounts) {
          for (Alias alias : kAliases) {
            checkReduce(v, t, op, count, alias, true, rng);
            if (HasFatalFailure()) return;
          }
          // Without finalize Avg and PreMulSum are plain sums.
          if (op == TestOp::Avg || op == TestOp::PreMulSum)
            checkReduce(v, t, op, count, Alias::None, false, rng);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST(Copy, EveryDtypeOpCountAndAliasing) {
  std::mt19937_64 rng(678);
  for (const KernelVariant& v : loomtest::kernelVariants()) {
    for (const Dtype& t : kDtypes) {
      for (TestOp op : {TestOp::Sum, TestOp::Avg, TestOp::PreMulSum}) {
        for (size_t count : kCounts) {
          for (bool inPlace : {false, true}) {
            for (bool finalize : {false, true}) {
              checkCopy(v, t, op, count, inPlace, finalize, rng);
              if (HasFatalFailure()) return;
            }
          }
        }
      }
    }
  }
}

}  // namespace
