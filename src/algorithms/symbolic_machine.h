// The verifier's engine: runs all ranks' plans over symbolic memory. verifier.cc decides what the
// memory holds before (inputs, layouts) and what it must hold after; this file only executes plans and
// reports what goes wrong on the way (bad steps, reads of undefined elements, writes to inputs, lanes of
// one rank touching the same element, duplicate or premature reductions, deadlock, unmatched messages).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/plan.h"
#include "base/status.h"

namespace loom::verify {

// The symbolic content of one element: the input element it derives from (origin buffer and index),
// the set of ranks whose copies of that input it combines (one bit per rank, so at most 64 ranks),
// whether it holds anything at all, and whether the reduction's post-processing has been applied.
struct Value {
  static constexpr uint8_t kDefined = 1;
  static constexpr uint8_t kFinal = 2;

  uint64_t ranks = 0;
  uint32_t index = 0;
  uint16_t origin = 0;
  uint8_t flags = 0;

  bool defined() const { return (flags & kDefined) != 0; }
  bool final() const { return (flags & kFinal) != 0; }
  bool operator==(const Value&) const = default;

  // Rank `rank`'s input element `index` of buffer `origin`.
  static Value input(int rank, uint32_t origin, uint64_t index) {
    return Value{uint64_t{1} << rank, static_cast<uint32_t>(index), static_cast<uint16_t>(origin), kDefined};
  }
};
std::string describe(const Value& value);

// Where a buffer of the plan's buffer table lives in a rank's symbolic memory. Buffers may overlap
// (in-place layouts); a buffer that is absent on a rank has present == false.
struct BufferSpec {
  bool present = false;
  uint64_t base = 0;
  uint64_t size = 0;
  bool writable = false;
  std::string name;
};

struct RankMemory {
  std::vector<BufferSpec> buffers;  // indexed by buffer id
  std::vector<Value> cells;
};

struct MachineConfig {
  int nranks = 1;
  Collective coll = Collective::AllReduce;  // every plan must be for this collective
  bool reduction = false;                   // reduce steps and finalize allowed
  uint64_t messageLimit = 0;                // largest message allowed (the request's chunkElems)
  uint32_t maxChannels = 0;                 // connections per peer pair the transports made; 0: any
  std::string layout;                       // named in every error, e.g. "in-place"
};

// Runs plans[r] for every rank r over (*memory)[r], which holds the inputs before and the results
// after. Connections hold two messages, the least an executor may offer.
Status runPlans(const MachineConfig& config, const std::vector<Plan>& plans, std::vector<RankMemory>* memory);

}  // namespace loom::verify
