#include "algorithms/machine_model.h"

#include <algorithm>
#include <map>
#include <utility>

#include "topology/graph.h"
#include "topology/job_topology.h"
#include "topology/search.h"

namespace loom {
namespace {

// What a device operation costs before its first step, whatever the algorithm: the kernel's launch and
// start on the GPU, and the lanes' first poll of their FIFOs. NCCL's tuning model has the same term
// (its base latency, 6.6-8.4 us by protocol); see docs/PERFORMANCE.md, "The model against published
// machines", for the figures it was checked against.
constexpr double kDeviceLaunchUs = 8.4;

}  // namespace

int MachineModel::symmetryShift() const {
  const int k = ranksInNode();
  if (k >= nranks) return 1;
  return nranks % k == 0 ? k : nranks;
}

Status MachineModel::validate() const {
  if (nranks < 1) return invalidArgument("machine: nranks {} must be at least 1", nranks);
  if (ranksPerNode < 0) return invalidArgument("machine: ranksPerNode {} must not be negative", ranksPerNode);
  if (!(intraGbs > 0) || !(nicGbs > 0))
    return invalidArgument("machine: bandwidths must be positive (intra {} GB/s, NIC {} GB/s)", intraGbs, nicGbs);
  if (nicsPerNode < 1) return invalidArgument("machine: nicsPerNode {} must be at least 1", nicsPerNode);
  if (!(intraLatencyUs >= 0) || !(netLatencyUs >= 0) || !(stepUs >= 0) || !(copyGbs >= 0) || !(launchUs >= 0))
    return invalidArgument("machine: latencies, step and launch times and copy rate must not be negative");
  if (fifoSlots < 1) return invalidArgument("machine: fifoSlots {} must be at least 1", fifoSlots);
  return Status::Ok();
}

MachineModel defaultMachine(int nranks, int ranksPerNode) {
  MachineModel m;
  m.nranks = nranks;
  m.ranksPerNode = ranksPerNode;
  return m;
}

MachineModel hostMemoryMachine(int nranks, int ranksPerNode) {
  MachineModel m = defaultMachine(nranks, ranksPerNode);
  m.intraGbs = 12.0;
  m.copyGbs = 12.0;
  m.intraLatencyUs = 0.7;
  m.minChannelBytes = 16u << 20;
  return m;
}

double pathLatencyUs(PathType type) {
  switch (type) {
    case PathType::Loc: return 1.0;
    case PathType::Nvl:
    case PathType::Nvb: return 3.4;
    case PathType::Pix:
    case PathType::Pxb:
    case PathType::Phb:
    case PathType::Sys: return 5.7;
    case PathType::Net: return 14.0;
  }
  return 5.7;
}

int ranksPerGpu(const JobTopology& job) {
  std::map<std::pair<uint64_t, int32_t>, int> onGpu;
  int most = 1;
  for (const RankPlacement& p : job.placements)
    if (p.gpu >= 0) most = std::max(most, ++onGpu[{p.hostHash, p.gpu}]);
  return most;
}

MachineModel jobMachine(const JobTopology& job, MemorySide side, const GpuSharing& sharing) {
  const int ranksPerNode = job.hosts() > 1 ? job.ranksPerHost : 0;
  MachineModel m = side == MemorySide::Host ? hostMemoryMachine(job.nranks, ranksPerNode)
                                            : defaultMachine(job.nranks, ranksPerNode);
  if (side == MemorySide::Host) {
    if (job.copyGbs > 0) m.copyGbs = m.intraGbs = job.copyGbs;
  } else {
    if (job.ringGbs > 0) m.intraGbs = job.ringGbs;
    // Ranks on one GPU move their bytes through its memory: its copy rate, shared. (With one GPU the
    // ring search finds no ring bandwidth, and the default fabric would be far too slow.)
    if (const int ranks = sharing.ranksPerGpu > 0 ? sharing.ranksPerGpu : ranksPerGpu(job); ranks > 1) {
      const double shared = (sharing.copyGbs > 0 ? sharing.copyGbs : kGpuCopyGbsUnknown) / ranks;
      m.intraGbs = job.ringGbs > 0 ? std::min(m.intraGbs, shared) : shared;
    }
    m.intraLatencyUs = pathLatencyUs(job.worstPath);
    m.netLatencyUs = pathLatencyUs(PathType::Net);
    m.launchUs = kDeviceLaunchUs;
    m.lanesInParallel = true;
    m.copyGbs = kDeviceLaneGbs;
  }
  if (job.hosts() > 1) {
    m.nicsPerNode = std::max(1, job.nicsPerHost);
    if (job.nicGbs > 0) m.nicGbs = job.nicGbs;
  }
  return m;
}

Status applyTopology(const SystemGraph& graph, MachineModel* machine) {
  GpuChannels channels;
  if (graph.gpuCount() > 1) {
    LOOM_TRY(searchChannels(graph, {}, &channels));
    if (channels.ringBusGbs > 0) machine->intraGbs = channels.ringBusGbs;
  }
  if (machine->nicsPerNode <= 0 && graph.nicCount() > 0) machine->nicsPerNode = graph.nicCount();
  if (machine->nicGbs <= 0) {
    double best = 0;
    for (int id : graph.nics()) best = std::max(best, graph.node(id).speedGbs);
    if (best > 0) machine->nicGbs = best;
  }
  return Status::Ok();
}

}  // namespace loom
