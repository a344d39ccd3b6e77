// NVLink discovery through NVML, which is loaded with dlopen at run time: Loom builds and runs without
// the NVIDIA driver or its headers, so the few NVML types and entry points used are declared here.
#pragma once

#include "base/status.h"
#include "topology/graph.h"

namespace loom {

// Adds the active NVLinks of the graph's GPUs (matched by PCI bus id) to other GPUs, the NVSwitch fabric
// and CPUs, and fills in each GPU's compute capability. Returns Ok without changes when NVML is absent.
// Call before finalize().
Status addNvmlLinks(SystemGraph* graph);

}  // namespace loom
