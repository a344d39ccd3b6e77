#include "topology/nvswitch_option.h"

#include <algorithm>
#include <cmath>

#include "topology/hardware.h"

namespace loom {

Status withNvSwitch(const SystemGraph& in, double gbsPerGpu, SystemGraph* out) {
  if (!(gbsPerGpu > 0)) return invalidArgument("NVSwitch bandwidth {} GB/s must be positive", gbsPerGpu);
  if (in.gpuCount() == 0) return invalidArgument("{}: no GPU to join an NVSwitch", in.source);
  for (const Link& link : in.links())
    if (link.kind == LinkKind::NvLink)
      return invalidArgument("{} already has NVLinks; an added NVSwitch would double them", in.source);
  *out = SystemGraph();
  out->hostName = in.hostName;
  out->source = in.source;
  for (const Node& node : in.nodes()) out->addNode(node);  // same ids: links copy as they are
  for (const Link& link : in.links()) out->addLink(link.a, link.b, link.kind, link.bwGbs, link.count);
  Node fabric;
  fabric.kind = NodeKind::NvSwitch;
  fabric.name = "NVSwitch";
  const int sw = out->addNode(fabric);
  for (int gpu : in.gpus()) {
    const int links = std::max(1, static_cast<int>(std::lround(gbsPerGpu / nvlinkGbsPerLink(in.node(gpu).sm))));
    out->addLink(gpu, sw, LinkKind::NvLink, gbsPerGpu, links);
  }
  return out->finalize().withContext("topology with an added NVSwitch");
}

}  // namespace loom
