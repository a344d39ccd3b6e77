// Live discovery of this machine: hwloc for CPUs, NUMA, the PCIe tree, GPUs and NICs, then NVML (loaded
// at run time when the driver is installed) for NVLinks that hwloc did not report. A machine without
// GPUs, NICs or NVML is a normal result, not an error.
#pragma once

#include "base/status.h"
#include "topology/graph.h"

namespace loom {

// Fills an empty graph with this machine and finalizes it.
Status discoverLocalTopology(SystemGraph* graph);

}  // namespace loom
