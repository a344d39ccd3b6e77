#include "core/job_setup.h"

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <numeric>

#include <sstream>

#include "algorithms/machine_model.h"
#include "base/settings.h"
#include "base/log.h"
#include "core/communicator.h"
#include "core/observe/topology_report.h"
#include "device/device_layer.h"
#include "topology/calibration.h"
#include "topology/topology_file.h"

namespace loom {
namespace {

// LOOM_TOPO_GPU=i,j,...: the GPU the host's i-th rank stands for.
Status parseTopoGpu(std::vector<int>* out) {
  const std::string text = settingText(Setting::TopoGpu);
  out->clear();
  if (text.empty()) return Status::Ok();
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const long gpu = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || gpu < 0)
      return invalidArgument("LOOM_TOPO_GPU={}: '{}' is not a GPU index (a comma-separated list of them, one per "
                             "rank of the host)",
                             text, item);
    out->push_back(static_cast<int>(gpu));
  }
  return Status::Ok();
}

// The CPUs this process may run on, as a list ("0-3,8").
std::string affinityCpuList() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return "";
  std::string list;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &set)) continue;
    if (!list.empty()) list += ',';
    list += std::to_string(c);
  }
  return list;
}

// This host's graph. A file that cannot be used is the user's error; live discovery that fails leaves
// an empty graph (no GPUs, no NICs): the ranks then still agree, ordered by rank.
Status hostGraph(std::shared_ptr<const SystemGraph>* out) {
  Status loaded = hostTopology(out);
  if (loaded.ok() || settingIsSet(Setting::TopoFile)) return loaded;
  LOOM_WARN(Topo, "this machine's topology could not be discovered ({}); ranks are ordered by rank", loaded.message());
  auto empty = std::make_shared<SystemGraph>();
  empty->source = "live";
  LOOM_TRY(empty->finalize());
  *out = std::move(empty);
  return Status::Ok();
}

// This rank's place, from the graph, its host's ranks and its CUDA device.
Status placeThisRank(loomComm* comm, const SystemGraph& graph, RankPlacement* out) {
  const std::vector<RankInfo>& table = comm->bootstrap->table();
  const ProcessIdentity& me = table[static_cast<size_t>(comm->rank)].process;
  PlacementInputs in;
  for (int r = 0; r < comm->rank; ++r) in.localIndex += table[static_cast<size_t>(r)].process.sameHost(me);
  // A device list named the device; otherwise the device this thread already works on, if any.
  if (comm->cudaDevice < 0) comm->cudaDevice = device::activeDevice();
  in.cudaDevice = comm->cudaDevice;
  in.cudaBusId = device::busIdOf(comm->cudaDevice);
  LOOM_TRY(parseTopoGpu(&in.gpuOverride));
  in.cpuList = affinityCpuList();
  LOOM_TRY(placeRank(graph, in, out));
  out->hostHash = me.hostHash;
  Calibration calibration;
  LOOM_TRY(processCalibration(&calibration));
  out->copyGbs = static_cast<float>(calibration.copyGbs);
  return Status::Ok();
}

// One rank's part of an exchange and whether it has one. A rank that fails its part still takes part
// in the exchange, so that every other rank fails naming it and its reason, instead of losing the
// connection to it mid-exchange. The reasons travel only when some rank failed, in a second round:
// every rank gathers every part, so each byte of a part costs n bytes on every rank (1024 rank
// threads gathered half a KiB of empty reason per rank, twice, at init).
template <typename Part>
struct Contribution {
  Part part{};
  int32_t code = loomSuccess;
};

template <typename Part>
Status exchangeParts(loomComm* comm, const char* what, const Status& local, const Part& mine, std::vector<Part>* all) {
  Contribution<Part> contribution;
  contribution.part = mine;
  contribution.code = local.code();
  std::vector<Contribution<Part>> gathered(static_cast<size_t>(comm->nranks));
  LOOM_TRY(comm->bootstrap->allGather(&contribution, gathered.data(), sizeof contribution).withContext(what));
  std::vector<int32_t> codes;
  for (const Contribution<Part>& c : gathered) codes.push_back(c.code);
  LOOM_TRY(shareFailure(*comm->bootstrap, codes, local, fmt::format("failed its {}", what), what));
  all->clear();
  for (const Contribution<Part>& c : gathered) all->push_back(c.part);
  return Status::Ok();
}

// This rank's part of its host's plan, from every rank's placement.
Status planMyPartOfHost(const loomComm* comm, const SystemGraph& graph, const std::vector<RankPlacement>& placements,
                        HostChannelRecord* out) {
  LOOM_TRY(checkHostsAgree(placements));
  const uint64_t myHost = placements[static_cast<size_t>(comm->rank)].hostHash;
  std::vector<int> hostRanks;
  for (int r = 0; r < comm->nranks; ++r)
    if (placements[static_cast<size_t>(r)].hostHash == myHost) hostRanks.push_back(r);
  std::vector<HostChannelRecord> records;
  LOOM_TRY(chooseHostChannels(graph, hostRanks, placements, &records));
  *out = records[static_cast<size_t>(std::find(hostRanks.begin(), hostRanks.end(), comm->rank) - hostRanks.begin())];
  return Status::Ok();
}

// Steps 2 and 3 where every rank is a thread of this process: one host, each of whose ranks' records
// any rank can compute from the placements every rank holds alike; so the first rank here plans the
// host and assembles the job for all of them, and no second exchange is needed. Each rank planning
// the whole host, then gathering every record, was O(n) work and memory per rank: the most of a
// 1024-thread init's topology phase (docs/PERFORMANCE.md, "Init of many rank threads").
Status planJobInThisProcess(LocalExchange& local, const SystemGraph& graph, const std::vector<RankPlacement>& placements,
                            std::shared_ptr<const JobTopology>* out) {
  const LocalExchange::Made made = local.makeOnce("job topology", [&] {
    auto job = std::make_shared<JobTopology>();
    std::vector<int> ranks(placements.size());
    std::iota(ranks.begin(), ranks.end(), 0);
    std::vector<HostChannelRecord> records;
    Status st = checkHostsAgree(placements);
    if (st.ok()) st = chooseHostChannels(graph, ranks, placements, &records);
    if (st.ok()) st = assembleJob(placements, records, job.get());
    return LocalExchange::Made{st, std::move(job)};
  });
  LOOM_TRY(made.status.withContext("plan of its host"));
  *out = std::static_pointer_cast<const JobTopology>(made.object);
  return Status::Ok();
}

}  // namespace

std::shared_ptr<const std::vector<std::vector<int>>> tunerRings(const loomComm& comm) {
  // LOOM_RANKS_PER_NODE emulates nodes of that many ranks on this host: rings then come from that
  // shape (the tuner's rail rings), not from the real hosts.
  if (comm.settings.ranksPerNode > 0) return nullptr;
  return std::shared_ptr<const std::vector<std::vector<int>>>(comm.job, &comm.job->rings);  // owned by the job
}

MachineModel commMachine(const loomComm& comm, MemorySide side, const GpuSharing& sharing) {
  MachineModel m = jobMachine(*comm.job, side, sharing);
  // LOOM_RANKS_PER_NODE emulates nodes of that many ranks on this host: the model takes that shape.
  if (comm.settings.ranksPerNode > 0) m.ranksPerNode = comm.settings.ranksPerNode;
  m.fifoSlots = static_cast<int>(comm.settings.nslots);
  return m;
}

void adoptDeviceFabric(loomComm* comm) {
  const device::DeviceFabric fabric = comm->device->fabric();
  MachineModel m = commMachine(*comm, MemorySide::Device, GpuSharing{fabric.gpuCopyGbs, fabric.ranksPerGpu});
  m.fifoSlots = fabric.fifoSlots;  // the GPU FIFOs' (LOOM_DEVICE_FIFO_SLOTS), not the host transports'
  m.peerMemory = fabric.peerMemory;  // rank threads of one GPU: peer-memory plans are candidates
  comm->deviceTuner->setMachine(m);
  // Rank processes of one GPU: they are, for buffers in windows (a tuner made only then: its rings are
  // every channel's order of every rank, a copy per tuner).
  if (fabric.peerMemoryInWindows) {
    m.peerMemory = true;
    comm->windowTuner = std::make_unique<Tuner>(m, tunerRings(*comm));
  }
}

Status setUpJobTopology(loomComm* comm) {
  std::shared_ptr<const SystemGraph> graph;
  RankPlacement mine;
  Status placed = hostGraph(&graph);
  if (placed.ok()) placed = placeThisRank(comm, *graph, &mine);
  std::vector<RankPlacement> placements;
  LOOM_TRY(exchangeParts(comm, "placement in its host's topology", placed, mine, &placements));

  if (LocalExchange* local = comm->bootstrap->localExchange()) {
    LOOM_TRY(planJobInThisProcess(*local, *graph, placements, &comm->job));
  } else {
    HostChannelRecord myRecord;
    const Status planned = planMyPartOfHost(comm, *graph, placements, &myRecord);
    std::vector<HostChannelRecord> records;
    LOOM_TRY(exchangeParts(comm, "plan of its host", planned, myRecord, &records));
    auto job = std::make_shared<JobTopology>();
    LOOM_TRY(assembleJob(placements, records, job.get()));
    comm->job = std::move(job);
  }
  comm->numaBinding = NumaBinding::forNode(*graph, mine.numa);

  const std::shared_ptr<const std::vector<std::vector<int>>> rings = tunerRings(*comm);
  comm->tuner = std::make_unique<Tuner>(commMachine(*comm, MemorySide::Host), rings);
  comm->deviceTuner = std::make_unique<Tuner>(commMachine(*comm, MemorySide::Device), rings);
  comm->hostGraph = std::move(graph);
  return Status::Ok();
}

}  // namespace loom
