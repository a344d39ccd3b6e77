#include "topology/graph.h"

#include <algorithm>
#include <climits>
#include <tuple>

#include "topology/paths.h"

namespace loom {

const char* pathTypeName(PathType type) {
  switch (type) {
    case PathType::Loc: return "LOC";
    case PathType::Nvl: return "NVL";
    case PathType::Nvb: return "NVB";
    case PathType::Pix: return "PIX";
    case PathType::Pxb: return "PXB";
    case PathType::Phb: return "PHB";
    case PathType::Sys: return "SYS";
    case PathType::Net: return "NET";
  }
  return "?";
}

const char* nodeKindName(NodeKind kind) {
  switch (kind) {
    case NodeKind::Cpu: return "CPU";
    case NodeKind::PciSwitch: return "PCI switch";
    case NodeKind::Gpu: return "GPU";
    case NodeKind::NvSwitch: return "NVSwitch";
    case NodeKind::Nic: return "NIC";
  }
  return "?";
}

int SystemGraph::addNode(Node node) {
  nodes_.push_back(std::move(node));
  adjacency_.emplace_back();
  return static_cast<int>(nodes_.size()) - 1;
}

int SystemGraph::addLink(int a, int b, LinkKind kind, double bwGbs, int count) {
  Link link;
  link.a = a;
  link.b = b;
  link.kind = kind;
  link.bwGbs = bwGbs;
  link.count = count;
  links_.push_back(link);
  int id = static_cast<int>(links_.size()) - 1;
  adjacency_.at(static_cast<size_t>(a)).push_back(id);
  adjacency_.at(static_cast<size_t>(b)).push_back(id);
  return id;
}

int SystemGraph::addOrWidenLink(int a, int b, LinkKind kind, double bwGbs, int count) {
  for (int id : adjacency_.at(static_cast<size_t>(a))) {
    Link& link = links_[static_cast<size_t>(id)];
    if (link.kind == kind && otherEnd(id, a) == b) {
      link.bwGbs += bwGbs;
      link.count += count;
      return id;
    }
  }
  return addLink(a, b, kind, bwGbs, count);
}

int SystemGraph::otherEnd(int link, int from) const {
  const Link& l = links_.at(static_cast<size_t>(link));
  return l.a == from ? l.b : l.a;
}

int SystemGraph::findByBusId(const std::string& busId) const {
  if (busId.empty()) return -1;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].busId == busId) return static_cast<int>(i);
  return -1;
}

Status SystemGraph::finalize() {
  if (finalized_) return internalError("topology graph finalized twice");
  for (const Link& link : links_) {
    if (link.a == link.b) return internalError("topology link from node {} to itself", link.a);
    if (!(link.bwGbs > 0)) return internalError("topology link {}-{} without bandwidth", link.a, link.b);
  }
  gpus_.clear();
  nics_.clear();
  cpus_.clear();
  for (size_t i = 0; i < nodes_.size(); ++i) {
    int id = static_cast<int>(i);
    if (nodes_[i].kind == NodeKind::Gpu) gpus_.push_back(id);
    if (nodes_[i].kind == NodeKind::Nic) nics_.push_back(id);
    if (nodes_[i].kind == NodeKind::Cpu) cpus_.push_back(id);
  }
  // GPUs in CUDA device order where the source says it, else in PCI bus order (CUDA's
  // CUDA_DEVICE_ORDER=PCI_BUS_ID); NICs in the order the importer hinted through nicIndex.
  std::stable_sort(gpus_.begin(), gpus_.end(), [&](int x, int y) {
    const Node& a = nodes_[static_cast<size_t>(x)];
    const Node& b = nodes_[static_cast<size_t>(y)];
    return std::make_tuple(a.cudaDev < 0 ? INT_MAX : a.cudaDev, a.busId) <
           std::make_tuple(b.cudaDev < 0 ? INT_MAX : b.cudaDev, b.busId);
  });
  std::stable_sort(nics_.begin(), nics_.end(), [&](int x, int y) {
    int a = nodes_[static_cast<size_t>(x)].nicIndex, b = nodes_[static_cast<size_t>(y)].nicIndex;
    return (a < 0 ? INT_MAX : a) < (b < 0 ? INT_MAX : b);
  });
  for (size_t i = 0; i < gpus_.size(); ++i) {
    Node& gpu = nodes_[static_cast<size_t>(gpus_[i])];
    gpu.gpuIndex = static_cast<int>(i);
    gpu.name = fmt::format("GPU{}", i);
  }
  for (size_t i = 0; i < nics_.size(); ++i) nodes_[static_cast<size_t>(nics_[i])].nicIndex = static_cast<int>(i);

  paths_.assign(nodes_.size() * nodes_.size(), Path{});
  for (size_t i = 0; i < nodes_.size(); ++i) {
    NodeKind kind = nodes_[i].kind;
    if (kind != NodeKind::Gpu && kind != NodeKind::Nic && kind != NodeKind::Cpu) continue;
    std::vector<Path> row = computePathsFrom(*this, static_cast<int>(i));
    std::move(row.begin(), row.end(), paths_.begin() + static_cast<ptrdiff_t>(i * nodes_.size()));
  }
  finalized_ = true;
  return Status::Ok();
}

const Path& SystemGraph::path(int fromNode, int toNode) const {
  static const Path kNone;
  if (!finalized_ || fromNode < 0 || toNode < 0) return kNone;
  size_t n = nodes_.size();
  if (static_cast<size_t>(fromNode) >= n || static_cast<size_t>(toNode) >= n) return kNone;
  return paths_[static_cast<size_t>(fromNode) * n + static_cast<size_t>(toNode)];
}

std::vector<int> SystemGraph::closestNics(int gpu) const {
  std::vector<int> best;
  for (int nic = 0; nic < nicCount(); ++nic) {
    const Path& p = gpuNicPath(gpu, nic);
    if (!p.exists()) continue;
    if (best.empty()) {
      best.push_back(nic);
      continue;
    }
    const Path& b = gpuNicPath(gpu, best.front());
    if (p.type < b.type || (p.type == b.type && p.bwGbs > b.bwGbs * (1 + 1e-9))) best.assign(1, nic);
    else if (p.type == b.type && p.bwGbs >= b.bwGbs * (1 - 1e-9)) best.push_back(nic);
  }
  return best;
}

int SystemGraph::closestNic(int gpu) const {
  const std::vector<int> mine = closestNics(gpu);
  if (mine.size() <= 1) return mine.empty() ? -1 : mine.front();
  int before = 0;  // GPUs of lower index that tie for the same NICs
  for (int other = 0; other < gpu; ++other)
    if (closestNics(other) == mine) ++before;
  return mine[static_cast<size_t>(before) % mine.size()];
}

}  // namespace loom
