// NCCL's topology XML (what NCCL_TOPO_FILE reads and NCCL_TOPO_DUMP_FILE writes):
//   <system version="1">
//     <cpu numaid= affinity= arch= vendor= familyid= modelid=>
//       <pci busid= class= vendor= device= subsystem_vendor= subsystem_device= link_speed= link_width=>
//         <pci ...> <gpu dev= sm= rank= gdr=> <nvlink target= count= tclass=/> </gpu> </pci>
//         <pci ...> <nic> <net name= dev= speed= gdr=/> </nic> </pci>
// Hand-written files may give GPUs and NICs only as PCI classes (0x0300/0x0302, 0x0200/0x0207), as
// cloud vendors' files do. Loom adds one attribute NCCL ignores: loom_gbs on <nvlink>, the link's
// bandwidth, so that links measured by hwloc survive a round trip.
#pragma once

#include <string>

#include "base/status.h"
#include "base/tools_api.h"
#include "topology/graph.h"

namespace loom {

// Adds the document's machine to the graph (does not finalize it).
Status importNcclXml(const std::string& xml, SystemGraph* graph);

// The graph as an NCCL topology XML document.
LOOM_TOOLS_API Status writeNcclXml(const SystemGraph& graph, std::string* out);

}  // namespace loom
