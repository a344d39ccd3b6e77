#include "base/rank_path.h"

#include <unistd.h>

namespace loom {

std::string pathForRank(const std::string& pattern, int rank, bool* perRank) {
  std::string path;
  *perRank = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size() && (pattern[i + 1] == 'r' || pattern[i + 1] == 'p')) {
      *perRank = *perRank || pattern[i + 1] == 'r';
      path += pattern[i + 1] == 'r' ? std::to_string(rank) : std::to_string(getpid());
      ++i;
    } else {
      path += pattern[i];
    }
  }
  return path;
}

}  // namespace loom
