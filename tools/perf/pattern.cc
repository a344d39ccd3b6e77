#include "pattern.h"

#include <algorithm>
#include <cmath>

#include "element_codec.h"

namespace loomperf {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

bool isPowerOfTwo(int n) { return n > 0 && (n & (n - 1)) == 0; }

// Values beyond this add nothing to the checks and only slow the generator down.
constexpr int64_t kSumValueCap = 1000;
constexpr int64_t kSpreadValueCap = 1 << 20;
constexpr int kProdPowerCap = 30;

}  // namespace

ValuePattern::ValuePattern(loomDataType_t type, RedOp op, int nranks)
    : type_(type),
      op_(op),
      nranks_(nranks),
      seed_(splitmix64(static_cast<uint64_t>(type) * 64 + static_cast<uint64_t>(op))),
      signedValues_(false),
      activeRanks_(nranks),
      maxValue_(0),
      roundsAverage_(false) {
  const DataTypeInfo& info = dataTypeInfo(type);
  const auto maxExact = static_cast<int64_t>(info.maxExact);
  switch (op) {
    case RedOp::Sum:
    case RedOp::Avg:
    case RedOp::PreMulSum: {
      // Every partial sum is bounded by (active ranks) * weight * maxValue <= maxExact.
      const int64_t weight = op == RedOp::PreMulSum ? 2 : 1;
      activeRanks_ = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(nranks, maxExact / weight)));
      maxValue_ = std::min(kSumValueCap, maxExact / (weight * activeRanks_));
      // Averages stay non-negative so that the integer quotient has one meaning.
      signedValues_ = info.isSigned && op != RedOp::Avg;
      roundsAverage_ = op == RedOp::Avg && info.isFloat && !isPowerOfTwo(nranks);
      break;
    }
    case RedOp::Prod:
      // Factors are 1, -1 and at most maxPow2Exp twos per index.
      activeRanks_ = std::min({nranks, info.maxPow2Exp, kProdPowerCap});
      signedValues_ = info.isSigned;
      break;
    case RedOp::Max:
    case RedOp::Min:
    case RedOp::None:
      maxValue_ = std::min(kSpreadValueCap, maxExact);
      signedValues_ = info.isSigned;
      break;
  }
}

uint64_t ValuePattern::hash(int rank, size_t index) const {
  return splitmix64(seed_ ^ (static_cast<uint64_t>(rank) << 44) ^ static_cast<uint64_t>(index));
}

bool ValuePattern::active(int rank, size_t index, int limit) const {
  return static_cast<int>((index % static_cast<size_t>(nranks_) + static_cast<size_t>(rank)) %
                          static_cast<size_t>(nranks_)) < limit;
}

double ValuePattern::input(int rank, size_t index) const {
  const uint64_t h = hash(rank, index);
  if (op_ == RedOp::Prod) {
    if (active(rank, index, activeRanks_) && (h & 1)) return 2.0;
    return signedValues_ && (h & 2) ? -1.0 : 1.0;
  }
  if (!active(rank, index, activeRanks_)) return 0.0;
  if (signedValues_) {
    const auto span = static_cast<uint64_t>(2 * maxValue_ + 1);
    return static_cast<double>(static_cast<int64_t>(h % span) - maxValue_);
  }
  return static_cast<double>(h % static_cast<uint64_t>(maxValue_ + 1));
}

double ValuePattern::reduced(size_t index) const {
  double acc = input(0, index);
  if (op_ == RedOp::PreMulSum) acc *= preMulScalar(0);
  for (int r = 1; r < nranks_; ++r) {
    const double v = input(r, index);
    switch (op_) {
      case RedOp::Sum:
      case RedOp::Avg:
        acc += v;
        break;
      case RedOp::PreMulSum:
        acc += preMulScalar(r) * v;
        break;
      case RedOp::Prod:
        acc *= v;
        break;
      case RedOp::Max:
        acc = std::max(acc, v);
        break;
      case RedOp::Min:
        acc = std::min(acc, v);
        break;
      case RedOp::None:
        break;
    }
  }
  if (op_ == RedOp::Avg) {
    acc /= nranks_;
    if (!dataTypeInfo(type_).isFloat) acc = std::floor(acc);  // integer quotient of a sum >= 0
  }
  return acc;
}

double ValuePattern::tolerance(double expected) const {
  if (!roundsAverage_) return 0.0;
  // Each rank's term may be rounded once (pre-multiplied by 1/n in the element type) and each of the
  // n-1 partial sums once more, every time by at most an ulp of the result: 2n ulps covers both.
  const double ulp = visitCodec(type_, [&](auto codec) { return decltype(codec)::ulp(expected); });
  return 2.0 * nranks_ * ulp;
}

}  // namespace loomperf
