#include "algorithms/rail_rings.h"

namespace loom {

std::vector<std::vector<int>> railRings(int nranks, int ranksPerNode, int nchannels) {
  const int k = ranksPerNode;
  if (k <= 1 || k >= nranks || nranks % k != 0 || nchannels < 1) return {};
  std::vector<std::vector<int>> rings(nchannels);
  for (int c = 0; c < nchannels; ++c) {
    std::vector<int>& ring = rings[c];
    ring.reserve(nranks);
    for (int node = 0; node < nranks / k; ++node)
      for (int t = 1; t <= k; ++t) ring.push_back(node * k + (c + t) % k);
  }
  return rings;
}

}  // namespace loom
