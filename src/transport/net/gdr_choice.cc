#include "transport/net/gdr_choice.h"

#include <cctype>

#include "base/settings.h"
#include "transport/net/provider.h"

namespace loom::net {

const char* gdrModeName(GdrMode mode) {
  switch (mode) {
    case GdrMode::Staged: return "staged through host memory";
    case GdrMode::Dmabuf: return "GPUDirect RDMA through dmabuf";
    case GdrMode::Peermem: return "GPUDirect RDMA through nvidia-peermem";
  }
  return "?";
}

Status parseGdrLevel(const std::string& given, GdrLevel* out) {
  std::string text = given;
  for (char& ch : text) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  GdrLevel l;
  l.set = true;
  // NCCL's numbers: 0 LOC, 1 PIX, 2 PXB, 3 PHB, 4 and 5 SYS.
  static const struct {
    const char* name;
    const char* number;
    PathType farthest;
  } kLevels[] = {{"PIX", "1", PathType::Pix}, {"PXB", "2", PathType::Pxb}, {"PHB", "3", PathType::Phb},
                 {"SYS", "4", PathType::Sys}, {"SYS", "5", PathType::Sys}};
  if (text == "LOC" || text == "0") {
    l.never = true;
    *out = l;
    return Status::Ok();
  }
  for (const auto& level : kLevels) {
    if (text == level.name || text == level.number) {
      l.farthest = level.farthest;
      *out = l;
      return Status::Ok();
    }
  }
  return invalidArgument("LOOM_NET_GDR_LEVEL={} is not a level: LOC (never), PIX, PXB, PHB or SYS (always), or 0..5",
                         given);
}

Status gdrLevelFromEnvironment(GdrLevel* out) {
  const std::string text = settingIsSet(Setting::NetGdrLevel) ? settingText(Setting::NetGdrLevel) : "";
  if (text.empty()) {
    *out = GdrLevel{};
    return Status::Ok();
  }
  return parseGdrLevel(text, out);
}

GdrChoice chooseGdr(const GdrFacts& facts, const GdrLevel& level) {
  GdrChoice c;
  const std::string setting = level.set ? "LOOM_NET_GDR_LEVEL" : "the default level";
  const bool nicDmabuf = (facts.ptrSupport & kDmabufPointers) != 0;
  const bool nicCuda = (facts.ptrSupport & kCudaPointers) != 0;
  if (level.never) {
    c.why = "LOOM_NET_GDR_LEVEL=LOC turns GPUDirect RDMA off";
    return c;
  }
  if (!nicDmabuf && !nicCuda) {
    c.why = fmt::format("{} takes host memory only (no dmabuf registration, no nvidia-peermem)", facts.nic);
    return c;
  }
  if (facts.gpuNicPath < 0) {
    c.why = fmt::format("the topology has no path from this GPU to {}", facts.nic);
    return c;
  }
  const auto path = static_cast<PathType>(facts.gpuNicPath);
  if (path > level.farthest) {
    c.why = fmt::format("the GPU reaches {} over {}, farther than {} {} allows", facts.nic, pathTypeName(path), setting,
                        pathTypeName(level.farthest));
    return c;
  }
  const std::string near = fmt::format("the GPU reaches {} over {} (within {} {})", facts.nic, pathTypeName(path),
                                       setting, pathTypeName(level.farthest));
  if (nicDmabuf && facts.cudaDmabuf) {
    c.mode = GdrMode::Dmabuf;
    c.why = near + " and both the NIC and the CUDA driver take dmabufs";
  } else if (nicCuda) {
    c.mode = GdrMode::Peermem;
    c.why = near + (nicDmabuf ? fmt::format(", the CUDA driver exports no dmabuf ({}), nvidia-peermem is loaded",
                                            facts.cudaDmabufWhy)
                              : std::string(", nvidia-peermem is loaded"));
  } else {
    c.why = near + fmt::format(" but the CUDA driver exports no dmabuf ({}) and nvidia-peermem is not loaded",
                               facts.cudaDmabufWhy);
  }
  return c;
}

}  // namespace loom::net
