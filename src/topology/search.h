// Channel search over one host's GPUs: rings that maximise the bandwidth of their slowest link, as many
// as the links can carry side by side (disjoint links where the hardware has them), and two
// complementary binary trees. The results are plain orderings of GPU indices, the form
// algorithms/builders.h takes (PlanRequest::rings).
#pragma once

#include <vector>

#include "base/status.h"
#include "base/tools_api.h"
#include "topology/graph.h"

namespace loom {

struct ChannelSearchOptions {
  int maxChannels = 16;     // rings at most
  long maxStepsPerRing = 50000;  // search budget for one ring, so that odd machines cannot stall init
  // The GPU indices to order (a job's ranks may use some of a host's GPUs); empty: every GPU.
  std::vector<int> gpus;
};

struct GpuChannels {
  // Each ring holds every GPU index searched (ChannelSearchOptions::gpus) once; GPU rings[r][i] sends to rings[r][(i + 1) % n]. All rings run
  // at ringChannelGbs at once without oversubscribing any link direction.
  std::vector<std::vector<int>> rings;
  double ringChannelGbs = 0;
  // Predicted ring allreduce bus bandwidth (nccl-tests' busbw): rings.size() * ringChannelGbs.
  double ringBusGbs = 0;

  // Binary trees in heap layout: trees[t][0] is the root and the parent of trees[t][p] is
  // trees[t][(p - 1) / 2]. With an even GPU count no GPU is an inner node of both trees.
  std::vector<std::vector<int>> trees;
  double treeGbs = 0;  // the slowest parent-child path of the trees
};

LOOM_TOOLS_API Status searchChannels(const SystemGraph& graph, const ChannelSearchOptions& options, GpuChannels* out);

// Bottleneck bandwidth of one ring on its own (its slowest hop's path), 0 if a hop has no path.
double ringBottleneckGbs(const SystemGraph& graph, const std::vector<int>& ring);

}  // namespace loom
