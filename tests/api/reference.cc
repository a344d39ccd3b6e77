#include "reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <vector>

namespace loomtest {
namespace {


// Maps h uniformly-ish onto [lo, hi] without a division.
int64_t mapRange(uint64_t h, int64_t lo, int64_t hi) {
  unsigned __int128 span =
      static_cast<unsigned __int128>(static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo)) + 1;
  uint64_t offset = static_cast<uint64_t>((static_cast<unsigned __int128>(h) * span) >> 64);
  return static_cast<int64_t>(static_cast<uint64_t>(lo) + offset);
}

// Per-call precomputation of everything the generators need, so the per-element work is one hash
// and a little arithmetic (these loops dominate the tests' run time).
class InputModel {
 public:
  explicit InputModel(const ReduceInputs& in) : in_(in), float_(isFloat(in.dtype)) {
    bases_.resize(in.nranks);
    for (int r = 0; r < in.nranks; ++r)
      bases_[r] = mix64(in.seed * 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(r + 1) << 40));
    if (float_) {
      q_ = (in.dtype == loomFloat32 || in.dtype == loomFloat64) ? 0.25 : 1.0;
      // Partial sums, in quanta, stay within the exactly representable integers, with one bit of
      // headroom left for PreMulSum's halving (which adds a bit of fraction).
      int64_t bound = in.dtype == loomFloat64   ? int64_t{1} << 42
                      : in.dtype == loomFloat32 ? int64_t{1} << 22
                                                : static_cast<int64_t>(floatInfo(in.dtype).intLimit());
      minMaxK_ = bound;
      sumK_ = bound / in.nranks;
    } else {
      info_ = intInfo(in.dtype);
      mask_ = widthMask(info_.bits);
      if (info_.isSigned)
        avgSignedK_ = static_cast<int64_t>(widthMask(info_.bits - 1) / static_cast<uint64_t>(in.nranks));
      else
        avgUnsignedK_ = widthMask(info_.bits) / static_cast<uint64_t>(in.nranks);
    }
  }

  uint64_t hash(int rank, size_t index) const { return mix64(bases_[rank] + index); }

  double floatValue(int rank, size_t index) const {
    uint64_t h = hash(rank, index);
    switch (in_.op) {
      case Op::Prod: {
        // {±1, ±2, ±0.5}: products of up to 8 stay within 2^±8, exact everywhere (e4m3 max 448).
        static constexpr double table[8] = {1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 0.5, 0.5};
        double v = table[h & 7];
        return (h >> 63) ? -v : v;
      }
      case Op::Max:
      case Op::Min:
        return static_cast<double>(mapRange(h, -minMaxK_, minMaxK_)) * q_;
      default:
        return static_cast<double>(mapRange(h, -sumK_, sumK_)) * q_;
    }
  }

  uint64_t intValue(int rank, size_t index) const {
    uint64_t h = hash(rank, index);
    switch (in_.op) {
      case Op::Prod: {
        // Mostly odd full-width values (products wrap but never collapse to 0), some 2 and -1.
        uint64_t sel = h >> 61;
        if (sel == 0) return 2;
        if (sel == 1) return mask_;
        return (h | 1) & mask_;
      }
      case Op::Avg:
        // The sum over all ranks must not wrap: Avg is the integer quotient of the true sum.
        if (info_.isSigned) return static_cast<uint64_t>(mapRange(h, -avgSignedK_, avgSignedK_)) & mask_;
        return static_cast<uint64_t>((static_cast<unsigned __int128>(h) *
                                      (static_cast<unsigned __int128>(avgUnsignedK_) + 1)) >> 64);
      default:
        return h & mask_;  // sum, max, min, premulsum: full range, sums wrap
    }
  }

  const IntInfo& ints() const { return info_; }
  uint64_t mask() const { return mask_; }

 private:
  ReduceInputs in_;
  bool float_;
  std::vector<uint64_t> bases_;
  double q_ = 1;
  int64_t minMaxK_ = 0, sumK_ = 0, avgSignedK_ = 0;
  uint64_t avgUnsignedK_ = 0;
  IntInfo info_{};
  uint64_t mask_ = 0;
};





double preMulScalarValue(loomDataType_t dtype) {
  if (isFloat(dtype)) return 0.5;
  return intInfo(dtype).isSigned ? -3.0 : 3.0;
}

struct Expected {
  uint64_t bits = 0;    // integers
  double value = 0;     // floats
  double tolerance = 0; // floats; 0 means exact
};


Expected expectedAt(const ReduceInputs& in, const InputModel& model, size_t index) {
  Expected e;
  const int n = in.nranks;
  if (isFloat(in.dtype)) {
    double acc = 0, absSum = 0;
    for (int r = 0; r < n; ++r) {
      double v = model.floatValue(r, index);
      absSum += std::fabs(v);
      if (r == 0) {
        acc = v;
        continue;
      }
      switch (in.op) {
        case Op::Prod: acc *= v; break;
        case Op::Max: acc = std::max(acc, v); break;
        case Op::Min: acc = std::min(acc, v); break;
        default: acc += v; break;
      }
    }
    if (in.op == Op::PreMulSum) acc *= preMulScalarValue(in.dtype);
    if (in.op == Op::Avg) {
      acc /= n;
      // Exact when n is a power of two (x/n and every partial sum are then representable); else
      // allow what computing sum(x_i * round(1/n)) with a rounding at every step can lose:
      // about (n+2) half-ulps of sum|x_i|/n, bounded by one ulp of sum|x_i|, plus subnormal steps.
      if ((n & (n - 1)) != 0) {
        double eps = std::ldexp(1.0, -floatInfo(in.dtype).manBits);
        e.tolerance = eps * absSum + n * minSubnormal(in.dtype);
      }
    }
    e.value = acc;
    return e;
  }
  const IntInfo info = model.ints();
  const uint64_t mask = model.mask();
  if (in.op == Op::Avg) {
    __int128 sum = 0;
    for (int r = 0; r < n; ++r) {
      uint64_t v = model.intValue(r, index);
      sum += info.isSigned ? static_cast<__int128>(signExtend(v, info.bits)) : static_cast<__int128>(v);
    }
    __int128 q = sum / n;  // C++ truncates toward zero
    e.bits = static_cast<uint64_t>(q) & mask;
    return e;
  }
  uint64_t acc = 0;
  for (int r = 0; r < n; ++r) {
    uint64_t v = model.intValue(r, index);
    if (r == 0) {
      acc = v;
      continue;
    }
    switch (in.op) {
      case Op::Prod: acc = (acc * v) & mask; break;
      case Op::Max:
        if (info.isSigned ? signExtend(v, info.bits) > signExtend(acc, info.bits) : v > acc) acc = v;
        break;
      case Op::Min:
        if (info.isSigned ? signExtend(v, info.bits) < signExtend(acc, info.bits) : v < acc) acc = v;
        break;
      default: acc = (acc + v) & mask; break;
    }
  }
  if (in.op == Op::PreMulSum) {
    uint64_t s = info.isSigned ? static_cast<uint64_t>(int64_t{-3}) : 3;
    acc = (acc * s) & mask;
  }
  e.bits = acc;
  return e;
}

std::string formatExpected(loomDataType_t dtype, const Expected& e) {
  std::ostringstream os;
  if (isFloat(dtype)) {
    os.precision(17);
    os << e.value;
    if (e.tolerance > 0) os << " (tolerance " << e.tolerance << ")";
  } else {
    IntInfo info = intInfo(dtype);
    if (info.isSigned)
      os << signExtend(e.bits, info.bits);
    else
      os << e.bits;
  }
  return os.str();
}

bool matchesExpected(loomDataType_t dtype, const void* got, const Expected& e) {
  if (!isFloat(dtype)) return loadBits(dtype, got) == e.bits;
  double v = decodeFloat(dtype, got);
  if (std::isnan(v)) return false;
  if (e.tolerance == 0) return v == e.value;
  return std::fabs(v - e.value) <= e.tolerance;
}

}  // namespace

uint64_t mix64(uint64_t x) {
  // splitmix64 finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

const char* opName(Op op) {
  switch (op) {
    case Op::Sum: return "sum";
    case Op::Prod: return "prod";
    case Op::Max: return "max";
    case Op::Min: return "min";
    case Op::Avg: return "avg";
    case Op::PreMulSum: return "premulsum";
  }
  return "?";
}



loomRedOp_t builtinOp(Op op) {
  switch (op) {
    case Op::Sum: return loomSum;
    case Op::Prod: return loomProd;
    case Op::Max: return loomMax;
    case Op::Min: return loomMin;
    case Op::Avg: return loomAvg;
    case Op::PreMulSum: break;
  }
  return loomNumOps;
}

void preMulScalar(loomDataType_t dtype, void* out) {
  if (isFloat(dtype)) {
    encodeExactFloat(dtype, 0.5, out);
  } else {
    IntInfo info = intInfo(dtype);
    storeBits(dtype, (info.isSigned ? static_cast<uint64_t>(int64_t{-3}) : 3) & widthMask(info.bits), out);
  }
}

void fillReduceInput(const ReduceInputs& in, int rank, size_t first, size_t count, void* dst) {
  uint8_t* out = static_cast<uint8_t*>(dst);
  const size_t es = dtypeSize(in.dtype);
  const InputModel model(in);
  if (isFloat(in.dtype)) {
    for (size_t i = 0; i < count; ++i)
      if (!encodeExactFloatFast(in.dtype, model.floatValue(rank, first + i), out + i * es))
        std::abort();  // a bug in this model: the input is not representable
  } else {
    for (size_t i = 0; i < count; ++i) {
      uint64_t v = model.intValue(rank, first + i);
      std::memcpy(out + i * es, &v, es);
    }
  }
}

std::string checkReduced(const ReduceInputs& in, size_t first, size_t count, const void* got) {
  const uint8_t* g = static_cast<const uint8_t*>(got);
  const size_t es = dtypeSize(in.dtype);
  size_t firstBad = SIZE_MAX, bad = 0;
  Expected firstExpected;
  const InputModel model(in);
  for (size_t i = 0; i < count; ++i) {
    Expected e = expectedAt(in, model, first + i);
    if (!matchesExpected(in.dtype, g + i * es, e)) {
      if (firstBad == SIZE_MAX) {
        firstBad = i;
        firstExpected = e;
      }
      ++bad;
    }
  }
  if (bad == 0) return "";
  std::ostringstream os;
  os << "[" << firstBad << "] got " << formatElement(in.dtype, g + firstBad * es) << " expected "
     << formatExpected(in.dtype, firstExpected) << " (" << bad << " of " << count << " elements wrong)";
  return os.str();
}

void fillPattern(void* dst, size_t bytes, uint64_t seed, int rank, uint64_t firstByte) {
  // Byte k of the pattern is byte (k % 8) of mix64(base + k / 8): a function of (seed, rank, k) only.
  uint8_t* out = static_cast<uint8_t*>(dst);
  const uint64_t base = mix64(seed ^ (static_cast<uint64_t>(rank + 1) << 40));
  size_t i = 0;
  while (i < bytes && ((firstByte + i) & 7) != 0) {
    uint64_t k = firstByte + i;
    out[i++] = static_cast<uint8_t>(mix64(base + (k >> 3)) >> (8 * (k & 7)));
  }
  for (; i + 8 <= bytes; i += 8) {
    uint64_t word = mix64(base + ((firstByte + i) >> 3));
    std::memcpy(out + i, &word, 8);  // little-endian: byte b of the word is pattern byte 8w+b
  }
  for (; i < bytes; ++i) {
    uint64_t k = firstByte + i;
    out[i] = static_cast<uint8_t>(mix64(base + (k >> 3)) >> (8 * (k & 7)));
  }
}

size_t findPatternMismatch(const void* got, size_t bytes, uint64_t seed, int rank, uint64_t firstByte,
                           size_t* mismatches) {
  std::vector<uint8_t> want(bytes);
  fillPattern(want.data(), bytes, seed, rank, firstByte);
  *mismatches = 0;
  if (bytes == 0 || std::memcmp(want.data(), got, bytes) == 0) return SIZE_MAX;
  const uint8_t* g = static_cast<const uint8_t*>(got);
  size_t first = SIZE_MAX;
  for (size_t i = 0; i < bytes; ++i) {
    if (g[i] != want[i]) {
      if (first == SIZE_MAX) first = i;
      ++*mismatches;
    }
  }
  return first;
}

}  // namespace loomtest
