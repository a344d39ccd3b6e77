// Path computation for SystemGraph::finalize(): the widest path (largest bottleneck bandwidth) from one
// node to every other, classified with NCCL's path classes. Routing rules follow NCCL: only switches and
// CPUs forward traffic, except that one GPU may relay between two NVLinks (NVB).
#pragma once

#include <vector>

#include "topology/graph.h"

namespace loom {

// One entry per node of the graph, indexed by destination node id.
std::vector<Path> computePathsFrom(const SystemGraph& graph, int source);

}  // namespace loom
