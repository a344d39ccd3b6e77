// Collectives by the words users write for them: LOOM_ALGO's rules, NCCL_ALGO's per-collective form
// and nccl-tests' binaries ("allreduce", "allgather", "reducescatter", "broadcast", "reduce",
// "alltoall", "gather", "scatter"). collectiveName (plan.h) is the API's spelling, for messages.
#pragma once

#include <string_view>

#include "algorithms/plan.h"
#include "base/tools_api.h"

namespace loom {

// Every collective that has a word, in NCCL's order (point-to-point has none: it is not tuned).
inline constexpr Collective kWordedCollectives[] = {Collective::AllReduce, Collective::AllGather,
                                                    Collective::ReduceScatter, Collective::Broadcast,
                                                    Collective::Reduce, Collective::AlltoAll,
                                                    Collective::Gather, Collective::Scatter};

// "allreduce", ...; "" for SendRecv.
LOOM_TOOLS_API const char* collectiveWord(Collective coll);
// The inverse, in any case and with underscores ignored (nccl-tests' "all_reduce"); false otherwise.
bool parseCollectiveWord(std::string_view word, Collective* coll);

}  // namespace loom
