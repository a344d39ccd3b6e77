#include "core/job_setup.h"

#include <sched.h>

#include <sstream>

#include "algorithms/machine_model.h"
#include "base/env.h"
#include "base/log.h"
#include "core/communicator.h"
#include "core/job_report.h"
#include "device/device_layer.h"
#include "topology/calibration.h"
#include "topology/topology_file.h"

namespace loom {
namespace {

// LOOM_TOPO_GPU=i,j,...: the GPU the host's i-th rank stands for.
Status parseTopoGpu(std::vector<int>* out) {
  const std::string text = envString("LOOM_TOPO_GPU", "");
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
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) list += (list.empty() ? "" : ",") + std::to_string(c);
  return list;
}

// This host's graph. A file that cannot be used is the user's error; live discovery that fails leaves
// an empty graph (no GPUs, no NICs): the ranks then still agree, ordered by rank.
Status hostGraph(std::shared_ptr<const SystemGraph>* out) {
  Status loaded = hostTopology(out);
  if (loaded.ok() || !envString("LOOM_TOPO_FILE", "").empty()) return loaded;
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
  PlacementInputs in;
  for (int r = 0; r < comm->rank; ++r) in.localIndex += table[static_cast<size_t>(r)].hostHash == table[static_cast<size_t>(comm->rank)].hostHash;
  // A device list named the device; otherwise the device this thread already works on, if any.
  if (comm->cudaDevice < 0) comm->cudaDevice = device::activeDevice();
  in.cudaDevice = comm->cudaDevice;
  in.cudaBusId = device::busIdOf(comm->cudaDevice);
  LOOM_TRY(parseTopoGpu(&in.gpuOverride));
  in.cpuList = affinityCpuList();
  LOOM_TRY(placeRank(graph, in, out));
  out->hostHash = table[static_cast<size_t>(comm->rank)].hostHash;
  Calibration calibration;
  LOOM_TRY(processCalibration(&calibration));
  out->copyGbs = static_cast<float>(calibration.copyGbs);
  return Status::Ok();
}

}  // namespace

Status setUpJobTopology(loomComm* comm) {
  std::shared_ptr<const SystemGraph> graph;
  LOOM_TRY(hostGraph(&graph));
  RankPlacement mine;
  LOOM_TRY(placeThisRank(comm, *graph, &mine));
  std::vector<RankPlacement> placements(static_cast<size_t>(comm->nranks));
  LOOM_TRY(comm->bootstrap->allGather(&mine, placements.data(), sizeof mine).withContext("topology: placements"));

  std::vector<int> hostRanks;
  for (int r = 0; r < comm->nranks; ++r)
    if (placements[static_cast<size_t>(r)].hostHash == mine.hostHash) hostRanks.push_back(r);
  std::vector<HostChannelRecord> records;
  LOOM_TRY(planHost(*graph, hostRanks, placements, &records));
  const HostChannelRecord myRecord = records[static_cast<size_t>(
      std::find(hostRanks.begin(), hostRanks.end(), comm->rank) - hostRanks.begin())];
  std::vector<HostChannelRecord> all(static_cast<size_t>(comm->nranks));
  LOOM_TRY(comm->bootstrap->allGather(&myRecord, all.data(), sizeof myRecord).withContext("topology: host plans"));
  LOOM_TRY(assembleJob(placements, all, &comm->job));

  // LOOM_RANKS_PER_NODE emulates nodes of that many ranks on this host: the model takes that shape,
  // and rings come from it (the tuner's rail rings), not from the real hosts.
  const bool emulatedNodes = comm->settings.ranksPerNode > 0;
  auto machineFor = [&](MemorySide side) {
    MachineModel m = jobMachine(comm->job, side);
    if (emulatedNodes) m.ranksPerNode = comm->settings.ranksPerNode;
    m.fifoSlots = static_cast<int>(comm->settings.nslots);
    return m;
  };
  const std::vector<std::vector<int>> rings = emulatedNodes ? std::vector<std::vector<int>>{} : comm->job.rings;
  comm->tuner = std::make_unique<Tuner>(machineFor(MemorySide::Host), rings);
  comm->deviceTuner = std::make_unique<Tuner>(machineFor(MemorySide::Device), rings);
  reportJobTopology(comm, *graph);
  return Status::Ok();
}

}  // namespace loom
