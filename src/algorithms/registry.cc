// The registry's entries (registry.h). serves() repeats each builder's own refusals as a predicate;
// tests/unit/algorithms/registry_test.cc holds the two together over a sweep of requests.
#include "algorithms/registry.h"

#include <strings.h>

#include <iterator>

namespace loom {
namespace {

bool servesEveryCollective(const PlanRequest& req) { return req.coll != Collective::SendRecv; }

bool treeServesRequest(const PlanRequest& req) {
  return req.coll == Collective::AllReduce || req.coll == Collective::Reduce || req.coll == Collective::Broadcast;
}

bool oneShotServesRequest(const PlanRequest& req) {
  return req.coll == Collective::AllReduce && req.count <= req.chunkElems;
}

bool hierServesRequest(const PlanRequest& req) {
  return req.coll == Collective::AllReduce && req.ranksPerNode >= 1 && req.nranks % req.ranksPerNode == 0;
}

bool peerOneShotServesRequest(const PlanRequest& req) {
  return req.coll == Collective::AllReduce && req.peerMemory && req.nranks <= kMaxPeerMemoryRanks;
}
constexpr CollectiveSet kPeerCollectives = {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather,
                                            Collective::Broadcast};
bool peerServesRequest(const PlanRequest& req) {
  return kPeerCollectives.has(req.coll) && req.peerMemory && req.nranks <= kMaxPeerMemoryRanks;
}

constexpr CollectiveSet kRingCollectives = {Collective::AllReduce, Collective::Broadcast, Collective::Reduce,
                                            Collective::AllGather, Collective::ReduceScatter};

// Ring's builder hands alltoall, gather and scatter to direct's: timing it there would time direct twice.
bool ringIsTried(const PlanRequest& req) { return kRingCollectives.has(req.coll); }

// One node is an intra-node reduce-scatter and all-gather, one rank per node a ring: others' shapes.
bool hierIsTried(const PlanRequest& req) {
  return hierServesRequest(req) && req.ranksPerNode > 1 && req.ranksPerNode < req.nranks;
}

uint64_t alignToOneElement(Collective, int) { return 1; }
uint64_t alignToRanksForAllReduce(Collective coll, int nranks) {
  return coll == Collective::AllReduce ? static_cast<uint64_t>(nranks) : 1;
}
uint64_t alignToRanks(Collective, int nranks) { return static_cast<uint64_t>(nranks); }

constexpr AlgorithmEntry kRegistry[] = {
    {Algorithm::Tree, "tree",
     "NCCL's double binary tree: reduce up, broadcast down, pipelined level by level; channels alternate "
     "between the two trees",
     {Collective::AllReduce, Collective::Reduce, Collective::Broadcast}, "", buildTreePlan, treeServesRequest, treeServesRequest,
     RingOrders::Communicator, false, alignToOneElement},
    {Algorithm::OneShot, "oneshot",
     "every rank sends its whole vector to every peer and combines all of them in rank order: one hop, "
     "bitwise identical results on every rank",
     {Collective::AllReduce}, "at most one message (count <= chunk)", buildOneShotPlan, oneShotServesRequest,
     oneShotServesRequest, RingOrders::None, true, alignToOneElement},
    {Algorithm::Ring, "ring",
     "one lane per channel around the channel's ring, chunked into loops so that it pipelines (alltoall, "
     "gather and scatter: direct's plans)",
     kRingCollectives, "", buildRingPlan, servesEveryCollective, ringIsTried, RingOrders::CommunicatorOrRails, false,
     alignToRanksForAllReduce},
    {Algorithm::Hierarchical, "hier",
     "intra-node reduce-scatter, per-rail inter-node ring allreduce, intra-node all-gather",
     {Collective::AllReduce}, "nodes of ranksPerNode contiguous ranks, dividing nranks", buildHierarchicalPlan,
     hierServesRequest, hierIsTried, RingOrders::None, false, alignToRanks},
    {Algorithm::Direct, "direct", "one hop to every peer; a lane per peer, direction and channel",
     {Collective::AllReduce, Collective::Broadcast, Collective::Reduce, Collective::AllGather,
      Collective::ReduceScatter, Collective::AlltoAll, Collective::Gather, Collective::Scatter},
     "", buildDirectPlan, servesEveryCollective, servesEveryCollective, RingOrders::None, false, alignToRanksForAllReduce},
    {Algorithm::PeerOneShot, "peer-oneshot",
     "every rank reads every rank's whole input from its memory and reduces them in rank order (one-shot's "
     "bits); no messages, two meetings per lane",
     {Collective::AllReduce}, "ranks that address each other's buffers (rank threads on one GPU), at most 8",
     buildPeerOneShotPlan, peerOneShotServesRequest, peerOneShotServesRequest, RingOrders::None, false,
     alignToOneElement},
    {Algorithm::PeerMemory, "peer",
     "reads and writes in the peers' memory: allreduce two-shot (rank r reduces block r of every input into "
     "every output), reducescatter, allgather, broadcast; no messages, two meetings per lane",
     kPeerCollectives, "ranks that address each other's buffers (rank threads on one GPU), at most 8", buildPeerPlan,
     peerServesRequest, peerServesRequest, RingOrders::None, false, alignToRanksForAllReduce},
};

// Every Algorithm value has exactly one entry (checked once, at compile time).
constexpr bool everyAlgorithmOnce() {
  for (Algorithm a : kAllAlgorithms) {
    int found = 0;
    for (const AlgorithmEntry& e : kRegistry) found += e.id == a;
    if (found != 1) return false;
  }
  return std::size(kRegistry) == std::size(kAllAlgorithms);
}
static_assert(everyAlgorithmOnce(), "every Algorithm needs exactly one registry entry");

}  // namespace

std::span<const AlgorithmEntry> algorithmRegistry() { return kRegistry; }

const AlgorithmEntry& algorithmEntry(Algorithm algo) {
  for (const AlgorithmEntry& e : kRegistry)
    if (e.id == algo) return e;
  return kRegistry[0];  // unreachable: everyAlgorithmOnce
}

const AlgorithmEntry* findAlgorithm(std::string_view name) {
  for (const AlgorithmEntry& e : kRegistry) {
    const std::string_view entry(e.name);
    if (entry.size() == name.size() && strncasecmp(entry.data(), name.data(), name.size()) == 0) return &e;
  }
  return nullptr;
}

std::string algorithmNames() {
  std::string names;
  for (const AlgorithmEntry& e : kRegistry) names += (names.empty() ? "" : ", ") + std::string(e.name);
  return names;
}

}  // namespace loom
