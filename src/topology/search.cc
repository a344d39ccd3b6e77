#include "topology/search.h"

#include <algorithm>
#include <cmath>

#include "base/log.h"

namespace loom {
namespace {

constexpr double kEpsilon = 1e-6;

// Finds rings at a fixed per-ring speed, taking each ring's share out of every link direction it uses.
// Positions 0..n-1 of the packer stand for the GPU indices in gpus_ (the GPUs being ordered).
class RingPacker {
 public:
  RingPacker(const SystemGraph& g, std::vector<int> gpus, long maxSteps)
      : g_(g), gpus_(std::move(gpus)), n_(static_cast<int>(gpus_.size())), maxSteps_(maxSteps) {}

  std::vector<std::vector<int>> pack(double speed, int maxRings) {
    capacity_.assign(2 * g_.links().size(), 0);
    for (size_t l = 0; l < g_.links().size(); ++l) capacity_[2 * l] = capacity_[2 * l + 1] = g_.links()[l].bwGbs;
    std::vector<std::vector<int>> rings;
    while (static_cast<int>(rings.size()) < maxRings) {
      std::vector<int> ring{0};
      std::vector<bool> used(static_cast<size_t>(n_), false);
      used[0] = true;
      steps_ = 0;
      if (!extend(&ring, &used, speed)) break;
      for (int& position : ring) position = gpus_[static_cast<size_t>(position)];
      rings.push_back(std::move(ring));
    }
    return rings;
  }

 private:
  bool fits(const Path& p, double speed) const {
    if (!p.exists() || p.bwGbs < speed * (1 - kEpsilon)) return false;
    for (const LinkHop& hop : p.hops)
      if (capacity_[static_cast<size_t>(hop.directedId())] < speed * (1 - kEpsilon)) return false;
    return true;
  }

  void take(const Path& p, double amount) {
    for (const LinkHop& hop : p.hops) capacity_[static_cast<size_t>(hop.directedId())] -= amount;
  }

  double spare(const Path& p) const {
    double least = INFINITY;
    for (const LinkHop& hop : p.hops) least = std::min(least, capacity_[static_cast<size_t>(hop.directedId())]);
    return least;
  }

  // Depth-first: the next GPU over the widest path, then over the least used links (so that later
  // rings find untouched links), then the next index up. Hops are kept on success.
  const Path& hop(int from, int to) const { return g_.gpuPath(gpus_[static_cast<size_t>(from)], gpus_[static_cast<size_t>(to)]); }

  bool extend(std::vector<int>* ring, std::vector<bool>* used, double speed) {
    int last = ring->back();
    if (static_cast<int>(ring->size()) == n_) {
      if (n_ == 1) return true;
      const Path& closing = hop(last, ring->front());
      if (!fits(closing, speed)) return false;
      take(closing, speed);
      return true;
    }
    if (++steps_ > maxSteps_) return false;
    std::vector<int> next;
    for (int j = 0; j < n_; ++j)
      if (!(*used)[static_cast<size_t>(j)] && fits(hop(last, j), speed)) next.push_back(j);
    std::stable_sort(next.begin(), next.end(), [&](int a, int b) {
      const Path& pa = hop(last, a);
      const Path& pb = hop(last, b);
      if (std::abs(pa.bwGbs - pb.bwGbs) > kEpsilon * std::max(pa.bwGbs, pb.bwGbs)) return pa.bwGbs > pb.bwGbs;
      double sa = spare(pa), sb = spare(pb);
      if (std::abs(sa - sb) > kEpsilon * std::max(sa, sb)) return sa > sb;
      return (a - last + n_) % n_ < (b - last + n_) % n_;
    });
    for (int j : next) {
      const Path& path = hop(last, j);
      take(path, speed);
      ring->push_back(j);
      (*used)[static_cast<size_t>(j)] = true;
      if (extend(ring, used, speed)) return true;
      (*used)[static_cast<size_t>(j)] = false;
      ring->pop_back();
      take(path, -speed);
      if (steps_ > maxSteps_) return false;
    }
    return false;
  }

  const SystemGraph& g_;
  std::vector<int> gpus_;
  int n_;
  long maxSteps_;
  long steps_ = 0;
  std::vector<double> capacity_;  // per directed link: 2 * link + (reverse ? 1 : 0)
};

// Per-ring speeds worth trying: every link direction's bandwidth shared by 1..maxChannels rings.
std::vector<double> candidateSpeeds(const SystemGraph& g, const std::vector<int>& gpus, int maxChannels) {
  std::vector<double> base;
  for (int a : gpus)
    for (int b : gpus) {
      if (a == b) continue;
      const Path& p = g.gpuPath(a, b);
      if (!p.exists()) continue;
      base.push_back(p.bwGbs);
      for (const LinkHop& hop : p.hops) base.push_back(g.links()[static_cast<size_t>(hop.link)].bwGbs);
    }
  std::vector<double> speeds;
  for (double bw : base)
    for (int k = 1; k <= maxChannels; ++k) speeds.push_back(bw / k);
  std::sort(speeds.begin(), speeds.end(), std::greater<>());
  speeds.erase(std::unique(speeds.begin(), speeds.end(),
                           [](double x, double y) { return std::abs(x - y) <= kEpsilon * std::max(x, y); }),
               speeds.end());
  return speeds;
}

double treeBottleneck(const SystemGraph& g, const std::vector<int>& tree) {
  double least = INFINITY;
  for (size_t p = 1; p < tree.size(); ++p)
    least = std::min(least, g.gpuPath(tree[(p - 1) / 2], tree[p]).bwGbs);
  return std::isfinite(least) ? least : 0;
}

}  // namespace

double ringBottleneckGbs(const SystemGraph& graph, const std::vector<int>& ring) {
  if (ring.size() < 2) return 0;
  double least = INFINITY;
  for (size_t i = 0; i < ring.size(); ++i)
    least = std::min(least, graph.gpuPath(ring[i], ring[(i + 1) % ring.size()]).bwGbs);
  return least;
}

Status searchChannels(const SystemGraph& graph, const ChannelSearchOptions& options, GpuChannels* out) {
  if (!out) return invalidArgument("searchChannels: null output");
  if (options.maxChannels < 1) return invalidArgument("searchChannels: maxChannels {} < 1", options.maxChannels);
  *out = GpuChannels{};
  std::vector<int> gpus = options.gpus;
  if (gpus.empty())
    for (int g = 0; g < graph.gpuCount(); ++g) gpus.push_back(g);
  for (int g : gpus)
    if (g < 0 || g >= graph.gpuCount())
      return invalidArgument("searchChannels: GPU {} is not one of the graph's {}", g, graph.gpuCount());
  const int n = static_cast<int>(gpus.size());
  if (n == 0) return Status::Ok();
  if (n == 1) {
    out->rings = {gpus};
    out->trees = {gpus};
    return Status::Ok();
  }

  RingPacker packer(graph, gpus, options.maxStepsPerRing);
  double bestTotal = 0;
  for (double speed : candidateSpeeds(graph, gpus, options.maxChannels)) {
    if (speed * options.maxChannels <= bestTotal * (1 + kEpsilon)) break;  // cannot beat what we have
    std::vector<std::vector<int>> rings = packer.pack(speed, options.maxChannels);
    double total = speed * static_cast<double>(rings.size());
    if (total > bestTotal * (1 + kEpsilon)) {
      bestTotal = total;
      out->rings = std::move(rings);
      out->ringChannelGbs = speed;
    }
  }
  if (out->rings.empty()) {
    // Only when some GPU cannot reach another at all: keep index order so callers still get a ring.
    LOOM_WARN(Topo, "no ring over {} GPUs found; using index order", n);
    out->rings = {gpus};
    out->ringChannelGbs = ringBottleneckGbs(graph, gpus);
  }
  out->ringBusGbs = out->ringChannelGbs * static_cast<double>(out->rings.size());

  // Two trees over the first ring's order: the first half of the ring are the inner nodes of one tree,
  // the second half those of the other, so that both trees can run at once.
  std::vector<int> forward = out->rings.front();
  std::vector<int> backward(forward.rbegin(), forward.rend());
  out->trees = {forward, backward};
  out->treeGbs = std::min(treeBottleneck(graph, out->trees[0]), treeBottleneck(graph, out->trees[1]));
  return Status::Ok();
}

}  // namespace loom
