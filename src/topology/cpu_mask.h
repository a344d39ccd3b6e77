// CPU set spellings: NCCL writes affinity as comma-separated 32-bit hex words ("00000000,ffffffff"),
// people read lists ("0-31"). Converted through hwloc's bitmap so no format is hand-parsed twice.
#pragma once

#include <optional>
#include <set>
#include <string>

namespace loom {

// "00000000,0000ffff" -> "0-15"; nullopt when the text is not a hex mask.
std::optional<std::string> ncclMaskToCpuList(const std::string& mask);
// "0-15" -> "0000ffff" (NCCL's layout), padded with zero words to at least `minWords` words (NCCL sizes
// every mask of a machine alike); nullopt when the text is not a CPU list.
std::optional<std::string> cpuListToNcclMask(const std::string& list, size_t minWords = 1);
// "0-3,8,10-11" -> {0, 1, 2, 3, 8, 10, 11}; nullopt when the text is not a finite CPU list.
std::optional<std::set<int>> parseCpuList(const std::string& list);

}  // namespace loom
