// Plan builders: pure functions from an operation's shape to one rank's plan. No I/O, no transport,
// no CUDA. A builder that cannot serve a request returns loomInvalidArgument/loomInternalError.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "algorithms/plan.h"
#include "base/status.h"

namespace loom {

enum class Algorithm : uint8_t { Ring, Direct, Tree, Hierarchical };
const char* algorithmName(Algorithm algo);

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
};

// Elements of the user's send/recv buffers for a collective of this shape (on this rank).
uint64_t sendBufferElems(const PlanRequest& req);
uint64_t recvBufferElems(const PlanRequest& req);

Status buildRingPlan(const PlanRequest& req, Plan* plan);
Status buildDirectPlan(const PlanRequest& req, Plan* plan);
Status buildPlan(Algorithm algo, const PlanRequest& req, Plan* plan);

// Point-to-point operations of one group on one rank, in call order. Operations towards the same peer
// in the same direction are matched in order with the peer's; sends to self pair with receives from
// self in order and become copies.
Status buildP2pPlan(int nranks, int rank, const std::vector<P2pOp>& ops, uint64_t chunkElems, Plan* plan);

}  // namespace loom
