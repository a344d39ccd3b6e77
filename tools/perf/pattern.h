// The values each rank sends and the reductions it must get back. Values are small integers (or, for
// prod, powers of two and -1) chosen per (type, op, nranks) so that every partial result of every
// reduction order is exact in the element type: the expected result is then unique, and only a
// floating-point average over a rank count that is not a power of two rounds.
#pragma once

#include <cstddef>
#include <cstdint>

#include "loom.h"
#include "types.h"

namespace loomperf {

class ValuePattern {
 public:
  ValuePattern(loomDataType_t type, RedOp op, int nranks);

  // Element `index` of rank `rank`'s input (its whole send buffer, whatever the collective).
  double input(int rank, size_t index) const;
  // `op` applied over input(r, index) for every rank r.
  double reduced(size_t index) const;
  // Largest allowed |result - expected|: 0 wherever no rounding can occur.
  double tolerance(double expected) const;
  // The PreMulSum scalar of `rank` (1 or 2 by rank parity, as nccl-tests does).
  static double preMulScalar(int rank) { return 1.0 + (rank & 1); }

 private:
  uint64_t hash(int rank, size_t index) const;
  // A rank is "active" for an index when it may contribute a value that grows the result; bounding
  // the active ranks per index bounds every partial sum or product.
  bool active(int rank, size_t index, int limit) const;

  loomDataType_t type_;
  RedOp op_;
  int nranks_;
  uint64_t seed_;
  bool signedValues_;
  int activeRanks_;   // how many ranks per index contribute non-neutral values
  int64_t maxValue_;  // inputs lie in [-maxValue_, maxValue_] (or [0, maxValue_])
  bool roundsAverage_;
};

}  // namespace loomperf
