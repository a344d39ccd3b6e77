// LOOM_ALGO's rules: which algorithm to force on which calls, by collective and size, as UCC selects
// its algorithms per collective and message range (UCC writes `allreduce:0-4k:@0#allreduce:4k-inf:@1`;
// Loom `allreduce:0-64K:oneshot,64K-:ring`).
//
//   rules := rule [, rule]...          rule := [collective:][lo-[hi]:]algorithm
//
// - algorithm: a registry name (registry.h), any case. A lone one forces that algorithm on every
//   collective and size: `LOOM_ALGO=ring` means what it always meant.
// - collective: allreduce, allgather, reducescatter, broadcast, reduce, alltoall, gather, scatter (any
//   case, underscores ignored: collective_words.h). A rule without one repeats the previous rule's, so
//   `allreduce:0-64K:oneshot,64K-:ring` is two allreduce rules; a first rule without one covers every
//   collective.
// - lo-hi: the half-open range [lo, hi) of the call's size in bytes, with K/M/G suffixes (binary);
//   `lo-` (or `lo-inf`) is open-ended. The size is nccl-tests' (callBytes, builders.h: count x element
//   size, x nranks for allgather, reducescatter, alltoall, gather and scatter), as the cost model counts
//   it. A rule without a range covers every size.
// - The last rule that covers a call decides (later rules refine earlier ones: `ring,allreduce:0-64K:
//   oneshot`); a call no rule covers is tuned. A rule naming an algorithm that cannot serve the call
//   (tree for an allgather, oneshot above one message) is the tuner's forced algorithm that falls back
//   to its own choice, with its warning.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "algorithms/builders.h"
#include "base/status.h"

namespace loom {

struct AlgorithmRule {
  std::optional<Collective> coll;  // unset: every collective
  uint64_t lo = 0;                 // [lo, hi) bytes of the call
  uint64_t hi = std::numeric_limits<uint64_t>::max();  // max: open-ended
  Algorithm algorithm = Algorithm::Ring;

  bool covers(Collective c, uint64_t bytes) const { return (!coll || *coll == c) && bytes >= lo && bytes < hi; }
};

class AlgorithmRules {
 public:
  // `text` in the syntax above; "" (or blanks) gives no rules. A malformed one is loomInvalidArgument
  // naming the piece that is wrong and what would be right there.
  static Status parse(std::string_view text, AlgorithmRules* out);

  // The algorithm forced on a call of `coll` of `bytes` (callBytes), or none: the tuner chooses.
  std::optional<Algorithm> forCall(Collective coll, uint64_t bytes) const;

  bool empty() const { return rules_.empty(); }
  const std::vector<AlgorithmRule>& rules() const { return rules_; }
  // The rules in the syntax above, each with its collective spelled out ("" when there are none).
  std::string text() const;

 private:
  std::vector<AlgorithmRule> rules_;
};

}  // namespace loom
