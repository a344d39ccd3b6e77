// Ring orderings for multi-node shapes without a topology search: ranks grouped contiguously by node
// (node i holds ranks i*k .. i*k+k-1). Ring c visits the nodes in order and, inside each, starts at
// local rank (c+1) mod k and ends at local rank c mod k, so it leaves every node through local rank c
// and enters the next through local rank c+1. Channels thereby spread inter-node traffic over all
// local ranks (and their NICs), as NCCL's multi-node rings do; every ring is invariant under shifting
// ranks by k, which keeps plans symmetric for the cost model.
#pragma once

#include <vector>

namespace loom {

// nchannels orderings; empty when there is a single node or one rank per node (identity rings serve).
std::vector<std::vector<int>> railRings(int nranks, int ranksPerNode, int nchannels);

}  // namespace loom
