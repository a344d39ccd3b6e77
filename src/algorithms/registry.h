// The algorithm registry: one entry per collective algorithm, saying what it is called (LOOM_ALGO's
// word), what it does, which requests its builder serves and what the tuner and the cost model need to
// know of its plans. Everything that used to switch over Algorithm reads an entry instead: buildPlan
// looks the builder up, algorithmName/parseAlgorithmName read the names, the tuner enumerates its
// candidates here and asks serves() before building, loom-info prints the list.
//
// Adding an algorithm: a value at the end of Algorithm (builders.h), its builder, and an entry here
// (registry.cc); tests/unit/algorithms/registry_test.cc then holds serves() to the builder.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

#include "algorithms/builders.h"
#include "algorithms/plan.h"
#include "base/status.h"
#include "base/tools_api.h"

namespace loom {

// A set of collectives, one bit each.
class CollectiveSet {
 public:
  constexpr CollectiveSet(std::initializer_list<Collective> colls) {
    for (Collective c : colls) bits_ |= bit(c);
  }
  constexpr bool has(Collective c) const { return (bits_ & bit(c)) != 0; }

 private:
  static constexpr uint32_t bit(Collective c) { return uint32_t{1} << static_cast<unsigned>(c); }
  uint32_t bits_ = 0;
};

// Which rank orderings (PlanRequest::rings) the tuner gives an algorithm's channels.
enum class RingOrders {
  None,             // its builder reads none
  Communicator,     // the communicator's rings when it has some, else 0..n-1 for every channel
  CommunicatorOrRails,  // the communicator's rings, else one per rail across nodes (railRings)
};

struct AlgorithmEntry {
  Algorithm id;
  const char* name;         // LOOM_ALGO's word, traces' "via <name>"
  const char* description;  // one line (loom-info)
  // The collectives it has plans of its own for: what loom-info lists, and what the tuner times it for.
  CollectiveSet collectives;
  const char* needs;  // what else a request needs, in words; "" when nothing
  Status (*build)(const PlanRequest& req, Plan* plan);
  // Whether build() succeeds for a request that the shared validation accepts (valid ranks, root,
  // rings, chunk and channels): the builder's own refusals, as a predicate.
  bool (*serves)(const PlanRequest& req);
  // Whether the tuner times it for the request: serves(), less the requests where its plans are
  // another algorithm's (ring hands alltoall, gather and scatter to direct) or a degenerate shape
  // that others cover (hier on one node, or with one rank per node).
  bool (*tried)(const PlanRequest& req);
  RingOrders rings;
  // One message per peer on one lane whatever the chunk and channel count (oneshot): the tuner tries
  // one of each, and the cost model simulates any size exactly.
  bool oneMessage;
  // Elements of a channel's part that make every piece of a plan the same size (ring, hierarchical
  // and direct AllReduce cut a part into nranks blocks): the cost model extrapolates over such units.
  uint64_t (*alignment)(Collective coll, int nranks);
};

// Every algorithm, in the order the tuner tries them: latency-bound ones first (their times prune the
// others' lower bounds early), and among near ties the earlier one is kept.
LOOM_TOOLS_API std::span<const AlgorithmEntry> algorithmRegistry();
// The entry of `algo` (every Algorithm has one).
const AlgorithmEntry& algorithmEntry(Algorithm algo);
// By name, in any case; null when no algorithm is called that.
const AlgorithmEntry* findAlgorithm(std::string_view name);
// "tree, oneshot, ring, hier, direct, peer-oneshot, peer": for messages that list what LOOM_ALGO accepts.
std::string algorithmNames();

}  // namespace loom
