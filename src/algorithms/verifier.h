// The verifier: proves plans correct by running all ranks' plans over symbolic buffers. Every input
// element is a token (rank, buffer, index); a reduction result is the set of ranks it combines plus
// whether it was finalized. After the run every output element must hold exactly what the collective
// defines: each rank's token once and finalized once for reductions, the one right token for data
// movement. On the way it rejects reads of elements nothing wrote, writes to inputs or to buffers a
// rank does not have, two lanes of a rank touching one element (lanes are unordered), deadlock (with
// two FIFO slots per connection), mismatched or unreceived messages and malformed steps. The first
// failure is reported with layout, rank, lane, step and element. Supports up to 64 ranks.
#pragma once

#include <cstdint>
#include <vector>

#include "algorithms/builders.h"
#include "algorithms/plan.h"
#include "base/status.h"

namespace loom {

// plansOfAllRanks[r] is rank r's plan for req (req.rank is ignored). Checks the out-of-place layout
// and, when the collective has one, NCCL's in-place layout (see hasInPlaceLayout).
Status verifyPlans(const PlanRequest& req, const std::vector<Plan>& plansOfAllRanks);

// One layout only: out of place, or in place (AllReduce send == recv; Broadcast/Reduce send == recv at
// the root; AllGather send == recv + rank*count; ReduceScatter recv == send + rank*count; Gather send ==
// recv + root*count and Scatter recv == send + root*count at the root).
Status verifyPlansInLayout(const PlanRequest& req, const std::vector<Plan>& plansOfAllRanks, bool inPlace);

// Every collective but AlltoAll (whose in-place form the executor stages through a copy).
bool hasInPlaceLayout(Collective coll);

// Builds every rank's plan with buildPlan(algo, ...), req.rank set to each rank in turn.
Status buildPlansForAllRanks(Algorithm algo, const PlanRequest& req, std::vector<Plan>* plans);

// buildPlansForAllRanks + verifyPlans.
Status verifyAlgorithm(Algorithm algo, const PlanRequest& req);

// Point-to-point groups: opsOfAllRanks[r] is rank r's group in call order. The groups must pair up
// (the k-th send from a to b has the count of the k-th receive on b from a), else loomInvalidArgument.
Status buildP2pPlansForAllRanks(int nranks, const std::vector<std::vector<P2pOp>>& opsOfAllRanks,
                                uint64_t chunkElems, std::vector<Plan>* plans);
Status verifyP2pPlans(int nranks, const std::vector<std::vector<P2pOp>>& opsOfAllRanks, uint64_t chunkElems,
                      const std::vector<Plan>& plansOfAllRanks);
Status verifyP2p(int nranks, const std::vector<std::vector<P2pOp>>& opsOfAllRanks, uint64_t chunkElems);

}  // namespace loom
