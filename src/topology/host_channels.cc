// One host's channels for the job's ranks on it (job_topology.h, step 2): its rings over those ranks,
// and for each channel the NIC it leaves the host through and the rank next to that NIC.
#include <algorithm>
#include <cstdio>
#include <tuple>

#include "topology/job_topology.h"
#include "topology/search.h"

namespace loom {
namespace {

// How close a rank is to a NIC: the path from its GPU, or, for a rank without one, whether the NIC
// hangs under its NUMA node (PHB) or another (SYS). Smaller is closer: (class, -bandwidth).
std::tuple<int, double> distance(const SystemGraph& host, const RankPlacement& p, int nic) {
  if (p.gpu >= 0) {
    const Path& path = host.gpuNicPath(p.gpu, nic);
    if (path.exists()) return {static_cast<int>(path.type), -path.bwGbs};
    return {static_cast<int>(PathType::Net), 0.0};
  }
  const int cpu = host.cpuOf(host.nics()[static_cast<size_t>(nic)]);
  const bool local = cpu >= 0 && p.numa >= 0 && host.node(cpu).numaId == p.numa;
  return {static_cast<int>(local ? PathType::Phb : PathType::Sys), 0.0};
}

// The NIC a rank uses for traffic that leaves the host: its GPU's (SystemGraph::closestNic), else the
// closest to its NUMA node.
int ownNic(const SystemGraph& host, const RankPlacement& p) {
  if (p.gpu >= 0 && host.closestNic(p.gpu) >= 0) return host.closestNic(p.gpu);
  int best = -1;
  for (int nic = 0; nic < host.nicCount(); ++nic)
    if (best < 0 || distance(host, p, nic) < distance(host, p, best)) best = nic;
  return best;
}

// The rings over the ranks: the topology search's rings over the GPUs they use, each GPU's ranks in
// rank order where it appears; ranks without a GPU follow, by NUMA node and rank.
std::vector<std::vector<int>> rankRings(const SystemGraph& host, std::span<const int> ranks,
                                        std::span<const RankPlacement> placements, GpuChannels* search) {
  std::vector<int> gpus;
  std::vector<int> cpuRanks;
  for (int r : ranks) {
    const int g = placements[static_cast<size_t>(r)].gpu;
    if (g >= 0) {
      if (std::find(gpus.begin(), gpus.end(), g) == gpus.end()) gpus.push_back(g);
    } else {
      cpuRanks.push_back(r);
    }
  }
  std::sort(gpus.begin(), gpus.end());
  std::stable_sort(cpuRanks.begin(), cpuRanks.end(), [&](int a, int b) {
    return placements[static_cast<size_t>(a)].numa < placements[static_cast<size_t>(b)].numa;
  });
  std::vector<std::vector<int>> gpuRings{{}};
  if (!gpus.empty()) {
    ChannelSearchOptions options;
    options.maxChannels = kMaxJobChannels;
    options.gpus = gpus;
    if (searchChannels(host, options, search).ok() && !search->rings.empty()) gpuRings = search->rings;
    else gpuRings = {gpus};
  }
  std::vector<std::vector<int>> rings;
  for (const std::vector<int>& gpuRing : gpuRings) {
    std::vector<int> ring;
    for (int g : gpuRing)
      for (int r : ranks)
        if (placements[static_cast<size_t>(r)].gpu == g) ring.push_back(r);
    ring.insert(ring.end(), cpuRanks.begin(), cpuRanks.end());
    rings.push_back(std::move(ring));
  }
  return rings;
}

// The worst path class between ring neighbours with GPUs (ranks sharing a GPU, or without one: LOC).
PathType worstNeighbourPath(const SystemGraph& host, const std::vector<std::vector<int>>& rings,
                            std::span<const RankPlacement> placements) {
  PathType worst = PathType::Loc;
  for (const std::vector<int>& ring : rings) {
    if (ring.size() < 2) continue;
    for (size_t i = 0; i < ring.size(); ++i) {
      const int a = placements[static_cast<size_t>(ring[i])].gpu;
      const int b = placements[static_cast<size_t>(ring[(i + 1) % ring.size()])].gpu;
      if (a >= 0 && b >= 0 && a != b) worst = std::max(worst, host.gpuPath(a, b).type);
    }
  }
  return worst;
}

// Where rail ring `c` enters the host: a rank whose own NIC is `nic`, else the rank closest to it; among
// ranks alike the c-th (in ring order), so that channels spread their crossings over them.
size_t entryOf(const SystemGraph& host, const std::vector<int>& ring, std::span<const RankPlacement> placements,
               int nic, int c) {
  const size_t k = ring.size();
  size_t entry = static_cast<size_t>(c) % k;
  if (nic < 0) return entry;
  for (size_t step = 0; step < k; ++step) {
    const size_t i = (static_cast<size_t>(c) + step) % k;
    if (ownNic(host, placements[static_cast<size_t>(ring[i])]) == nic) return i;
  }
  for (size_t step = 1; step < k; ++step) {
    const size_t i = (static_cast<size_t>(c) + step) % k;
    if (distance(host, placements[static_cast<size_t>(ring[i])], nic) <
        distance(host, placements[static_cast<size_t>(ring[entry])], nic))
      entry = i;
  }
  return entry;
}

// Each rank's place in `ring`, by rank (-1: not in it). Built once per ring: looking every rank up in
// every ring made this O(n^2) per channel on each of the host's n ranks (the most of a 256-rank init
// after the FIFOs).
std::vector<int16_t> positionsIn(const std::vector<int>& ring, int maxRank) {
  std::vector<int16_t> at(static_cast<size_t>(maxRank) + 1, -1);
  for (size_t i = 0; i < ring.size(); ++i) at[static_cast<size_t>(ring[i])] = static_cast<int16_t>(i);
  return at;
}

}  // namespace

Status chooseHostChannels(const SystemGraph& host, std::span<const int> hostRanks,
                          std::span<const RankPlacement> placements, std::vector<HostChannelRecord>* records) {
  if (hostRanks.empty()) return invalidArgument("chooseHostChannels: a host without ranks");
  GpuChannels search;
  std::vector<std::vector<int>> rings = rankRings(host, hostRanks, placements, &search);
  if (rings.size() > kMaxJobChannels) rings.resize(kMaxJobChannels);
  const int searchRings = static_cast<int>(rings.size());
  const int nics = host.nicCount();
  const bool gpus = std::any_of(hostRanks.begin(), hostRanks.end(),
                                [&](int r) { return placements[static_cast<size_t>(r)].gpu >= 0; });
  const int channels = std::min<int>(
      kMaxJobChannels, std::max({searchRings, nics, gpus ? 1 : static_cast<int>(hostRanks.size())}));

  std::vector<std::vector<int>> rails(static_cast<size_t>(channels));
  std::vector<int16_t> channelNic(static_cast<size_t>(channels), -1);
  double nicGbs = 0;
  for (int c = 0; c < channels; ++c) {
    std::vector<int>& rail = rails[static_cast<size_t>(c)];
    rail = rings[static_cast<size_t>(c % searchRings)];
    const int nic = nics > 0 ? c % nics : -1;
    channelNic[static_cast<size_t>(c)] = static_cast<int16_t>(nic);
    if (nic >= 0) {
      const double speed = host.node(host.nics()[static_cast<size_t>(nic)]).speedGbs;
      if (speed > 0) nicGbs = nicGbs > 0 ? std::min(nicGbs, speed) : speed;
    }
    std::rotate(rail.begin(), rail.begin() + static_cast<std::ptrdiff_t>(entryOf(host, rail, placements, nic, c)),
                rail.end());
  }

  records->assign(hostRanks.size(), HostChannelRecord{});
  const PathType worst = worstNeighbourPath(host, rings, placements);
  const int maxRank = *std::max_element(hostRanks.begin(), hostRanks.end());
  std::vector<std::vector<int16_t>> ringPositions, railPositions;
  for (const std::vector<int>& ring : rings) ringPositions.push_back(positionsIn(ring, maxRank));
  for (const std::vector<int>& rail : rails) railPositions.push_back(positionsIn(rail, maxRank));
  for (size_t i = 0; i < hostRanks.size(); ++i) {
    HostChannelRecord& rec = (*records)[i];
    const int rank = hostRanks[i];
    rec.searchRings = searchRings;
    rec.channels = channels;
    for (int c = 0; c < kMaxJobChannels; ++c) {
      rec.position[c] = c < searchRings ? ringPositions[static_cast<size_t>(c)][static_cast<size_t>(rank)] : -1;
      rec.railPosition[c] = c < channels ? railPositions[static_cast<size_t>(c)][static_cast<size_t>(rank)] : -1;
      rec.channelNic[c] = c < channels ? channelNic[static_cast<size_t>(c)] : -1;
    }
    rec.nic = ownNic(host, placements[static_cast<size_t>(rank)]);
    if (rec.nic >= 0) {
      const Node& nic = host.node(host.nics()[static_cast<size_t>(rec.nic)]);
      std::snprintf(rec.nicName, sizeof rec.nicName, "%s", nic.name.c_str());
      std::snprintf(rec.nicBusId, sizeof rec.nicBusId, "%s", nic.busId.c_str());
      const RankPlacement& placed = placements[static_cast<size_t>(rank)];
      if (placed.gpu >= 0 && host.gpuNicPath(placed.gpu, rec.nic).exists())
        rec.nicPath = static_cast<int32_t>(host.gpuNicPath(placed.gpu, rec.nic).type);
    }
    rec.nics = nics;
    rec.ringGbs = static_cast<float>(search.ringBusGbs);
    rec.nicGbs = static_cast<float>(nicGbs);
    rec.worstPath = static_cast<int32_t>(worst);
  }
  return Status::Ok();
}

}  // namespace loom
