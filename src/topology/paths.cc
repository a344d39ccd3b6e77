#include "topology/paths.h"

#include <algorithm>
#include <cmath>
#include <deque>

namespace loom {
namespace {

bool approxEqual(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(a, b); }

// Wider first; at equal width the better class, then the shorter route.
bool better(const Path& a, const Path& b) {
  if (!b.exists()) return a.exists();
  if (!approxEqual(a.bwGbs, b.bwGbs)) return a.bwGbs > b.bwGbs;
  if (a.type != b.type) return a.type < b.type;
  return a.hops.size() < b.hops.size();
}

// The class of one hop from `from` to `to`, as NCCL's ncclTopoSetPaths assigns it.
PathType hopType(const SystemGraph& g, int from, int to, const Link& link, int source) {
  NodeKind a = g.node(from).kind, b = g.node(to).kind;
  switch (link.kind) {
    case LinkKind::Sys: return PathType::Sys;
    case LinkKind::NvLink:
      // NVLink into a CPU and out again (POWER) still crosses the host.
      return (a == NodeKind::Cpu && from != source) ? PathType::Phb : PathType::Nvl;
    case LinkKind::Pci:
      if (a == NodeKind::Cpu || b == NodeKind::Cpu) return PathType::Phb;
      if (a == NodeKind::PciSwitch && b == NodeKind::PciSwitch) return PathType::Pxb;
      return PathType::Pix;
  }
  return PathType::Sys;
}

bool forwards(NodeKind kind) {
  return kind == NodeKind::PciSwitch || kind == NodeKind::NvSwitch || kind == NodeKind::Cpu;
}

Path extend(const SystemGraph& g, const Path& base, int from, int linkId, int source) {
  const Link& link = g.links()[static_cast<size_t>(linkId)];
  int to = g.otherEnd(linkId, from);
  Path next;
  next.type = std::max(base.type, hopType(g, from, to, link, source));
  next.bwGbs = std::min(base.bwGbs, link.bwGbs);
  next.hops = base.hops;
  next.hops.push_back(LinkHop{linkId, link.a != from});
  return next;
}

}  // namespace

std::vector<Path> computePathsFrom(const SystemGraph& g, int source) {
  size_t n = g.nodes().size();
  std::vector<Path> best(n);
  best[static_cast<size_t>(source)].type = PathType::Loc;
  best[static_cast<size_t>(source)].bwGbs = SystemGraph::kLocalGbs;

  // Label correcting: graphs are small (tens to a few hundred nodes), and a label only ever improves.
  std::deque<int> work{source};
  while (!work.empty()) {
    int from = work.front();
    work.pop_front();
    if (from != source && !forwards(g.node(from).kind)) continue;
    for (int linkId : g.linksOf(from)) {
      int to = g.otherEnd(linkId, from);
      if (to == source) continue;
      Path candidate = extend(g, best[static_cast<size_t>(from)], from, linkId, source);
      if (better(candidate, best[static_cast<size_t>(to)])) {
        best[static_cast<size_t>(to)] = std::move(candidate);
        work.push_back(to);
      }
    }
  }

  // NVB: GPU -> NVLink -> GPU -> NVLink -> GPU, one relay at most.
  if (g.node(source).kind == NodeKind::Gpu) {
    for (int first : g.linksOf(source)) {
      const Link& l1 = g.links()[static_cast<size_t>(first)];
      int relay = g.otherEnd(first, source);
      if (l1.kind != LinkKind::NvLink || g.node(relay).kind != NodeKind::Gpu) continue;
      Path viaRelay = extend(g, best[static_cast<size_t>(source)], source, first, source);
      for (int second : g.linksOf(relay)) {
        int to = g.otherEnd(second, relay);
        const Link& l2 = g.links()[static_cast<size_t>(second)];
        if (l2.kind != LinkKind::NvLink || to == source || g.node(to).kind != NodeKind::Gpu) continue;
        Path candidate = extend(g, viaRelay, relay, second, source);
        candidate.type = std::max(candidate.type, PathType::Nvb);
        if (better(candidate, best[static_cast<size_t>(to)])) best[static_cast<size_t>(to)] = std::move(candidate);
      }
    }
  }
  return best;
}

}  // namespace loom
