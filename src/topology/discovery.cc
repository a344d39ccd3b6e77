#include "topology/discovery.h"

#include <hwloc.h>
#include <unistd.h>

#include <memory>

#include "base/log.h"
#include "topology/hwloc_import.h"
#include "topology/nvml_links.h"

namespace loom {
namespace {

bool hasNvlinks(const SystemGraph& graph) {
  for (const Link& link : graph.links())
    if (link.kind == LinkKind::NvLink) return true;
  return false;
}

bool hasGpus(const SystemGraph& graph) {
  for (const Node& node : graph.nodes())
    if (node.kind == NodeKind::Gpu) return true;
  return false;
}

}  // namespace

Status discoverLocalTopology(SystemGraph* graph) {
  if (!graph) return invalidArgument("discoverLocalTopology: null graph");
  if (!graph->nodes().empty()) return invalidArgument("discoverLocalTopology: the graph is not empty");
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) return systemError("hwloc_topology_init failed");
  std::unique_ptr<hwloc_topology, HwlocTopologyDeleter> topo(raw);
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_ALL);
  if (hwloc_topology_load(raw) != 0) return systemError("hwloc could not discover this machine");
  HwlocImportOptions options;
  options.readSysfsNicSpeeds = true;
  LOOM_TRY(addHwlocTopology(raw, options, graph));

  if (hasGpus(*graph) && !hasNvlinks(*graph)) {
    Status nvml = addNvmlLinks(graph);
    if (!nvml.ok()) LOOM_WARN(Topo, "NVLink discovery through NVML failed, assuming PCIe only: {}", nvml.message());
  }
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) == 0) graph->hostName = host;
  graph->source = "live";
  return graph->finalize();
}

}  // namespace loom
