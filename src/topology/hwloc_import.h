// hwloc -> SystemGraph. Works on any loaded hwloc topology (live or imported from XML) whose I/O
// objects were kept (hwloc_topology_set_io_types_filter(..., HWLOC_TYPE_FILTER_KEEP_ALL)).
#pragma once

#include <string>

#include "base/status.h"
#include "topology/graph.h"

struct hwloc_topology;

namespace loom {

struct HwlocImportOptions {
  // Read NIC port speeds from /sys (only meaningful when the topology is this machine's).
  bool readSysfsNicSpeeds = false;
};

// Adds CPUs, PCI switches, GPUs, NICs and NVLinks (from the NVLinkBandwidth distances) to the graph.
// Does not finalize it.
Status addHwlocTopology(hwloc_topology* topology, const HwlocImportOptions& options, SystemGraph* graph);

// Destroys a loaded topology: std::unique_ptr<hwloc_topology, HwlocTopologyDeleter> (one definition
// for every file that loads one).
struct HwlocTopologyDeleter {
  void operator()(hwloc_topology* t) const;
};

// Loads an hwloc v1/v2 XML document (the caller has checked the version) into the graph. Does not
// finalize it.
Status importHwlocXml(const std::string& xml, SystemGraph* graph);

}  // namespace loom
