// A rank's placement and the assembly of the job (job_topology.h); one host's channels are host_channels.cc.
#include "topology/job_topology.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include "base/hash.h"
#include "topology/cpu_mask.h"
#include "topology/hardware.h"

namespace loom {
namespace {

// The NUMA node holding most of `cpuList`'s CPUs, -1 when no CPU node of the graph holds any.
int numaOfCpus(const SystemGraph& host, const std::string& cpuList) {
  // A CPU list is advisory here: a malformed one holds no CPU.
  const std::set<int> mine = parseCpuList(cpuList).value_or(std::set<int>{});
  int best = -1;
  size_t bestShared = 0;
  for (int id : host.cpus()) {
    size_t shared = 0;
    for (int c : parseCpuList(host.node(id).cpuList).value_or(std::set<int>{})) shared += mine.count(c);
    if (shared > bestShared) best = host.node(id).numaId, bestShared = shared;
  }
  return best;
}

}  // namespace

uint64_t graphFingerprint(const SystemGraph& graph) {
  Fnv1a h;
  h.field(graph.source);
  for (const Node& n : graph.nodes()) {
    h.value(n.kind);
    h.field(n.busId);
    h.value(n.gpuIndex);
    h.value(n.nicIndex);
    h.value(n.numaId);
  }
  for (const Link& l : graph.links()) {
    h.value(l.a);
    h.value(l.b);
    h.value(l.kind);
    h.value(l.bwGbs);
  }
  return h.digest();
}

Status placeRank(const SystemGraph& host, const PlacementInputs& in, RankPlacement* out) {
  RankPlacement p;
  p.cudaDevice = in.cudaDevice;
  p.graphFingerprint = graphFingerprint(host);
  if (in.cudaDevice >= 0) {
    // A device the graph does not show (a file of another machine, hwloc without PCI) has no place.
    const std::optional<std::string> bus = normalizeBusId(in.cudaBusId);
    const int node = bus ? host.findByBusId(*bus) : -1;
    if (node >= 0 && host.node(node).kind == NodeKind::Gpu) p.gpu = host.node(node).gpuIndex;
  } else if (!in.gpuOverride.empty()) {
    if (in.localIndex >= static_cast<int>(in.gpuOverride.size()))
      return invalidArgument("LOOM_TOPO_GPU names {} GPU(s), but this host has a rank {} (its index among the "
                             "host's ranks) that needs one",
                             in.gpuOverride.size(), in.localIndex);
    const int gpu = in.gpuOverride[static_cast<size_t>(in.localIndex)];
    if (gpu < 0 || gpu >= host.gpuCount())
      return invalidArgument("LOOM_TOPO_GPU: GPU {} is not one of the {} GPU(s) of {}", gpu, host.gpuCount(),
                             host.source);
    p.gpu = gpu;
  } else if (host.source != "live" && host.gpuCount() > 0) {
    p.gpu = in.localIndex % host.gpuCount();  // a host-memory rank standing for a GPU of the file
  }
  if (p.gpu >= 0) {
    const int cpu = host.cpuOf(host.gpus()[static_cast<size_t>(p.gpu)]);
    p.numa = cpu >= 0 ? host.node(cpu).numaId : -1;
  } else {
    p.numa = numaOfCpus(host, in.cpuList);
  }
  *out = p;
  return Status::Ok();
}

Status checkHostsAgree(std::span<const RankPlacement> placements) {
  std::map<uint64_t, int> firstOfHost;
  for (int r = 0; r < static_cast<int>(placements.size()); ++r) {
    const int first = firstOfHost.try_emplace(placements[static_cast<size_t>(r)].hostHash, r).first->second;
    if (placements[static_cast<size_t>(r)].graphFingerprint != placements[static_cast<size_t>(first)].graphFingerprint)
      return invalidArgument("ranks {} and {} share a host but see different topologies (is LOOM_TOPO_FILE, or the "
                             "hardware they see, the same for both?)",
                             first, r);
  }
  return Status::Ok();
}

Status assembleJob(std::span<const RankPlacement> placements, std::span<const HostChannelRecord> records,
                   JobTopology* out) {
  const int n = static_cast<int>(placements.size());
  if (n == 0 || records.size() != placements.size()) return invalidArgument("assembleJob: {} placements, {} records", n, records.size());
  JobTopology job;
  job.nranks = n;
  job.placements.assign(placements.begin(), placements.end());
  std::map<uint64_t, int> hostIndex;
  for (int r = 0; r < n; ++r) {
    auto [it, fresh] = hostIndex.try_emplace(placements[r].hostHash, static_cast<int>(job.hostRanks.size()));
    if (fresh) job.hostRanks.emplace_back();
    job.hostOf.push_back(it->second);
    job.hostRanks[static_cast<size_t>(it->second)].push_back(r);
  }

  // Every rank of a host must have planned it alike: same graph, same rings, same NICs.
  LOOM_TRY(checkHostsAgree(placements));
  for (const std::vector<int>& ranks : job.hostRanks) {
    const int first = ranks.front();
    const HostChannelRecord& a = records[static_cast<size_t>(first)];
    if (a.searchRings < 1 || a.searchRings > kMaxJobChannels || a.channels < a.searchRings ||
        a.channels > kMaxJobChannels)
      return invalidArgument("rank {} reports {} search ring(s) and {} rail ring(s) for its host", first,
                             a.searchRings, a.channels);
    for (int r : ranks) {
      const HostChannelRecord& b = records[static_cast<size_t>(r)];
      if (b.searchRings != a.searchRings || b.channels != a.channels ||
          std::memcmp(b.channelNic, a.channelNic, sizeof a.channelNic) != 0)
        return invalidArgument("ranks {} and {} share a host but see different topologies (is LOOM_TOPO_FILE, "
                               "LOOM_TOPO_GPU or the hardware they see the same for both?)",
                               first, r);
    }
  }
  // One host: its search rings. Several: rail rings, as many as every host has.
  const bool oneHost = job.hostRanks.size() == 1;
  int channels = kMaxJobChannels;
  for (const std::vector<int>& ranks : job.hostRanks) {
    const HostChannelRecord& h = records[static_cast<size_t>(ranks.front())];
    channels = std::min(channels, static_cast<int>(oneHost ? h.searchRings : h.channels));
  }
  for (int c = 0; c < channels; ++c) {
    std::vector<int> ring;
    std::vector<int> nics;
    for (const std::vector<int>& ranks : job.hostRanks) {
      std::vector<int> hostRing(ranks.size(), -1);
      for (int r : ranks) {
        const HostChannelRecord& rec = records[static_cast<size_t>(r)];
        const int pos = oneHost ? rec.position[c] : rec.railPosition[c];
        if (pos < 0 || pos >= static_cast<int>(ranks.size()) || hostRing[static_cast<size_t>(pos)] >= 0)
          return invalidArgument("rank {} reports place {} in its host's ring {}, which its host's {} rank(s) do "
                                 "not fill once each",
                                 r, pos, c, ranks.size());
        hostRing[static_cast<size_t>(pos)] = r;
      }
      ring.insert(ring.end(), hostRing.begin(), hostRing.end());
      nics.push_back(records[static_cast<size_t>(ranks.front())].channelNic[c]);
    }
    job.rings.push_back(std::move(ring));
    if (!oneHost) job.channelNics.push_back(std::move(nics));
  }

  job.nicsPerHost = INT32_MAX;
  job.ringGbs = -1;
  for (const std::vector<int>& ranks : job.hostRanks) {
    const HostChannelRecord& h = records[static_cast<size_t>(ranks.front())];
    job.nicsPerHost = std::min(job.nicsPerHost, static_cast<int>(h.nics));
    job.ringGbs = job.ringGbs < 0 ? h.ringGbs : std::min(job.ringGbs, static_cast<double>(h.ringGbs));
    if (h.nicGbs > 0) job.nicGbs = job.nicGbs > 0 ? std::min(job.nicGbs, static_cast<double>(h.nicGbs)) : h.nicGbs;
    job.worstPath = std::max(job.worstPath, static_cast<PathType>(h.worstPath));
  }
  for (int r = 0; r < n; ++r) {
    const HostChannelRecord& rec = records[static_cast<size_t>(r)];
    job.nicOf.push_back(rec.nic);
    job.nicNameOf.emplace_back(rec.nicName, strnlen(rec.nicName, sizeof rec.nicName));
    job.nicBusIdOf.emplace_back(rec.nicBusId, strnlen(rec.nicBusId, sizeof rec.nicBusId));
    job.nicPathOf.push_back(rec.nicPath);
    const double copy = placements[static_cast<size_t>(r)].copyGbs;
    if (copy > 0) job.copyGbs = job.copyGbs > 0 ? std::min(job.copyGbs, copy) : copy;
  }

  // Hosts of equal size holding contiguous ranks: the shape the hierarchical plans take.
  const size_t k = job.hostRanks.front().size();
  bool blocks = true;
  for (size_t h = 0; h < job.hostRanks.size() && blocks; ++h)
    blocks = job.hostRanks[h].size() == k && job.hostRanks[h].front() == static_cast<int>(h * k) &&
             job.hostRanks[h].back() == static_cast<int>((h + 1) * k - 1);
  job.ranksPerHost = blocks ? static_cast<int>(k) : 0;
  *out = std::move(job);
  return Status::Ok();
}

Status modelJob(const SystemGraph& host, const std::vector<std::vector<int>>& hostSlots, double copyGbs,
                JobTopology* out) {
  std::vector<RankPlacement> placements;
  for (size_t h = 0; h < hostSlots.size(); ++h) {
    if (hostSlots[h].empty()) return invalidArgument("modelJob: host {} has no rank", h);
    std::vector<int> gpus;  // the GPU each of the host's ranks stands for (none in a graph without GPUs)
    if (host.gpuCount() > 0)
      for (int slot : hostSlots[h]) gpus.push_back(slot % host.gpuCount());
    for (size_t i = 0; i < hostSlots[h].size(); ++i) {
      PlacementInputs in;
      in.localIndex = static_cast<int>(i);
      in.gpuOverride = gpus;
      RankPlacement placed;
      LOOM_TRY(placeRank(host, in, &placed));
      placed.hostHash = static_cast<uint64_t>(h) + 1;
      placed.copyGbs = static_cast<float>(copyGbs);
      placements.push_back(placed);
    }
  }
  if (placements.empty()) return invalidArgument("modelJob: no ranks");
  std::vector<HostChannelRecord> records(placements.size());
  int first = 0;
  for (const std::vector<int>& slots : hostSlots) {
    std::vector<int> ranks(slots.size());
    for (size_t i = 0; i < slots.size(); ++i) ranks[i] = first + static_cast<int>(i);
    std::vector<HostChannelRecord> hostRecords;
    LOOM_TRY(chooseHostChannels(host, ranks, placements, &hostRecords));
    for (size_t i = 0; i < ranks.size(); ++i) records[static_cast<size_t>(ranks[i])] = hostRecords[i];
    first += static_cast<int>(slots.size());
  }
  return assembleJob(placements, records, out);
}

Status modelJob(const SystemGraph& host, int nranks, int ranksPerHost, double copyGbs, JobTopology* out) {
  if (nranks < 1) return invalidArgument("modelJob: {} ranks", nranks);
  const int k = ranksPerHost > 0 ? ranksPerHost : nranks;
  std::vector<std::vector<int>> hostSlots;
  for (int r = 0; r < nranks; ++r) {
    if (r % k == 0) hostSlots.emplace_back();
    hostSlots.back().push_back(r % k);
  }
  return modelJob(host, hostSlots, copyGbs, out);
}

}  // namespace loom
