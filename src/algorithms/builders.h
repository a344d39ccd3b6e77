// Plan builders: pure functions from an operation's shape to one rank's plan. No I/O, no transport,
// no CUDA. A builder that cannot serve a request returns loomInvalidArgument/loomInternalError.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "algorithms/plan.h"
#include "base/status.h"

namespace loom {

// Add new algorithms at the end: the value is part of plan cache keys and traces. What each one is,
// serves and is called: its entry in the registry (registry.h), which every use goes through.
enum class Algorithm : uint8_t { Ring, Direct, Tree, Hierarchical, OneShot, PeerOneShot, PeerMemory };
// The enum's values (registry.cc checks at compile time that each has one registry entry).
inline constexpr Algorithm kAllAlgorithms[] = {Algorithm::Ring,    Algorithm::Direct,      Algorithm::Tree,
                                               Algorithm::Hierarchical, Algorithm::OneShot, Algorithm::PeerOneShot,
                                               Algorithm::PeerMemory};
// the registry's name: "ring", "direct", "tree", "hier", "oneshot", "peer-oneshot", "peer"
const char* algorithmName(Algorithm algo);
// The inverse of algorithmName, in any case (LOOM_ALGO's words); false for anything else.
bool parseAlgorithmName(std::string_view name, Algorithm* algo);

struct PlanRequest {
  Collective coll = Collective::AllReduce;
  int nranks = 1;
  int rank = 0;
  int root = 0;              // Broadcast, Reduce, Gather, Scatter
  uint64_t count = 0;        // the API's count (allgather: sendcount, reducescatter: recvcount, alltoall: per peer)
  size_t elemSize = 1;       // bytes per element (only for chunking decisions)
  uint64_t chunkElems = 1;   // largest message, in elements (>= 1)
  int nchannels = 1;         // independent lanes/rings splitting the data
  std::vector<std::vector<int>> rings;  // per-channel rank orderings; empty: 0..nranks-1 for every channel
  // Ranks per node, nodes holding contiguous ranks (node = rank / ranksPerNode); 0: unknown. Only the
  // hierarchical builder uses it, and it needs it.
  int ranksPerNode = 0;
  // The ranks can read and write each other's buffers (device plan kernels of rank threads of one
  // process on one GPU): the peer-memory algorithms need it, and nothing else looks at it.
  bool peerMemory = false;
};

// Elements of the user's send/recv buffers for a collective of this shape (on this rank).
uint64_t sendBufferElems(const PlanRequest& req);
uint64_t recvBufferElems(const PlanRequest& req);

// nccl-tests' size of a call (the "size" column; the cost model's CollectiveQuery::bytes; what
// LOOM_ALGO's size ranges match): count x elemSize, times nranks for the collectives whose size counts
// every rank's block (sizeCountsEveryBlock: AllGather, ReduceScatter, AlltoAll, Gather, Scatter).
// Saturates instead of overflowing.
bool sizeCountsEveryBlock(Collective coll);
uint64_t callBytes(Collective coll, uint64_t count, size_t elemSize, int nranks);

Status buildRingPlan(const PlanRequest& req, Plan* plan);
Status buildDirectPlan(const PlanRequest& req, Plan* plan);
// Double binary tree: AllReduce, Broadcast, Reduce (tree.cc).
Status buildTreePlan(const PlanRequest& req, Plan* plan);
// Intra-node reduce-scatter, per-rail inter-node ring allreduce, intra-node all-gather: AllReduce with
// req.ranksPerNode dividing nranks (hierarchical.cc).
Status buildHierarchicalPlan(const PlanRequest& req, Plan* plan);
// Every rank sends its whole vector to every peer and reduces all contributions in rank order, so all
// ranks get bitwise identical results: AllReduce with count <= chunkElems (one_shot.cc).
Status buildOneShotPlan(const PlanRequest& req, Plan* plan);
// Peer-memory plans (peer_memory.cc; req.peerMemory, at most kMaxPeerMemoryRanks ranks): no messages,
// two Meets per lane. peer-oneshot: AllReduce, every rank reduces every input in rank order. peer:
// AllReduce two-shot (block r of every input reduced by rank r into every rank's output),
// ReduceScatter, AllGather (each rank's input into every output), Broadcast (the root's input read).
Status buildPeerOneShotPlan(const PlanRequest& req, Plan* plan);
Status buildPeerPlan(const PlanRequest& req, Plan* plan);
// The registry's builder of `algo`.
Status buildPlan(Algorithm algo, const PlanRequest& req, Plan* plan);

// The allreduce tree channel `channel` of a tree plan follows over `order` (every rank once): each
// rank's parent, -1 for the root (tree.cc: channels alternate between a double binary tree's two).
std::vector<int> allReduceTreeParents(const std::vector<int>& order, int channel);

// Point-to-point operations of one group on one rank, in call order. Operations towards the same peer
// in the same direction are matched in order with the peer's; sends to self pair with receives from
// self in order and become copies. Every lane uses `channel`: the host path gives point-to-point traffic
// a channel of its own (TransportSet::p2pChannel), device FIFOs use channel 0.
Status buildP2pPlan(int nranks, int rank, const std::vector<P2pOp>& ops, uint64_t chunkElems, Plan* plan,
                    uint32_t channel = 0);

}  // namespace loom
