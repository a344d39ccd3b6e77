// File names that name their rank: "%r" becomes the rank and "%p" the process id, for per-rank output
// files (LOOM_TRACE_FILE, LOOM_GRAPH_DUMP_FILE, LOOM_TOPO_DUMP_FILE).
#pragma once

#include <string>

namespace loom {

// The pattern with %r and %p replaced; *perRank says whether it held %r (a file per rank).
std::string pathForRank(const std::string& pattern, int rank, bool* perRank);

}  // namespace loom
