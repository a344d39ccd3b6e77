// An NVSwitch a topology file leaves out. NCCL reads NVLink from NVML at run time, so topology files
// written for NCCL_TOPO_FILE may describe only the PCI tree (Azure's NDv4 file does); a model of such
// a machine adds the fabric by hand, visibly (loom-sim --nvswitch-gbs, loomModelConfig_t::nvswitchGbs).
#pragma once

#include "base/status.h"
#include "topology/graph.h"

namespace loom {

// `out` is `in` (finalized) with one NVSwitch joined by every GPU at gbsPerGpu GB/s per direction,
// in NVLinks of the GPU's generation. Fails when `in` already has NVLinks or has no GPU.
Status withNvSwitch(const SystemGraph& in, double gbsPerGpu, SystemGraph* out);

}  // namespace loom
