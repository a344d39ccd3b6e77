#include "core/observe/topology_report.h"

#include <fstream>

#include "algorithms/builders.h"
#include "base/settings.h"
#include "base/log.h"
#include "base/rank_path.h"
#include "core/communicator.h"
#include "topology/nccl_xml.h"

namespace loom {
namespace {

std::string joined(const std::vector<int>& ranks) {
  std::string text;
  for (int r : ranks) {
    if (!text.empty()) text += ' ';
    text += std::to_string(r);
  }
  return text;
}

nlohmann::ordered_json modelJson(const Tuner& tuner) {
  const MachineModel m = tuner.machine();
  nlohmann::ordered_json j;
  j["ranks_per_node"] = m.ranksInNode();
  j["intra_gbs"] = m.intraGbs;
  j["intra_latency_us"] = m.intraLatencyUs;
  j["copy_gbs"] = m.copyGbs;
  j["lanes_in_parallel"] = m.lanesInParallel;
  j["peer_memory"] = m.peerMemory;  // peer-memory plans are candidates (rank threads of one GPU)
  j["step_us"] = m.stepUs;
  j["launch_us"] = m.launchUs;
  j["nics_per_node"] = m.nicsPerNode;
  j["nic_gbs"] = m.nicGbs;
  j["net_latency_us"] = m.netLatencyUs;
  return j;
}

// Rank 0 writes `pattern`, or every rank when it holds %r.
void writeFor(const loomComm* comm, Setting setting, const std::string& text) {
  const std::string pattern = settingText(setting);
  const char* variable = specOf(setting).name;
  if (pattern.empty()) return;
  bool perRank = false;
  const std::string path = pathForRank(pattern, comm->rank, &perRank);
  if (!perRank && comm->rank != 0) return;
  std::ofstream file(path);
  if (!(file << text) || !file.flush()) LOOM_WARN(Graph, "{}: cannot write {}={}", comm->describe(), variable, path);
}

// The NIC rank r reaches other hosts through: none when the job has one host.
std::string usedNic(const JobTopology& job, int r) {
  return job.hosts() > 1 ? job.nicNameOf[static_cast<size_t>(r)] : std::string();
}

}  // namespace

const char* transportName(const loomComm* comm, int peer) {
  const SystemGraph& host = *comm->hostGraph;
  const JobTopology& job = *comm->job;
  const RankPlacement& a = job.placements[static_cast<size_t>(comm->rank)];
  const RankPlacement& b = job.placements[static_cast<size_t>(peer)];
  if (peer == comm->rank) return "self";
  // GPUs of one host that reach each other without crossing the CPUs' interconnect: NCCL's P2P level.
  if (a.hostHash == b.hostHash && a.cudaDevice >= 0 && b.cudaDevice >= 0 && a.gpu >= 0 && b.gpu >= 0 &&
      (a.gpu == b.gpu || host.gpuPath(a.gpu, b.gpu).type < PathType::Sys))
    return "p2p";
  switch (comm->transports->kind(peer)) {
    case TransportKind::Self: return "self";
    case TransportKind::Local: return "local";
    case TransportKind::Shm: return "shm";
    case TransportKind::Net: return "net";
  }
  return "?";
}

nlohmann::ordered_json topologyReport(const loomComm* comm) {
  const SystemGraph& host = *comm->hostGraph;
  const JobTopology& job = *comm->job;
  nlohmann::ordered_json j;
  j["nranks"] = job.nranks;
  j["rank"] = comm->rank;
  j["topology"] = host.source;
  j["hosts"] = job.hostRanks;
  j["rings"] = job.rings;
  nlohmann::ordered_json trees = nlohmann::ordered_json::array();
  for (size_t c = 0; c < std::min<size_t>(job.rings.size(), 2); ++c)
    trees.push_back({{"channel", c}, {"parents", allReduceTreeParents(job.rings[c], static_cast<int>(c))}});
  j["trees"] = trees;
  nlohmann::ordered_json transports = nlohmann::ordered_json::array();
  for (int peer = 0; peer < job.nranks; ++peer) transports.push_back(transportName(comm, peer));
  j["transports"] = transports;
  nlohmann::ordered_json nics = nlohmann::ordered_json::array();
  for (int r = 0; r < job.nranks; ++r) {
    const std::string name = usedNic(job, r);
    nics.push_back(name.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(name));
  }
  j["nics"] = nics;
  j["channel_nics"] = job.channelNics;
  j["gpus"] = nlohmann::ordered_json::array();
  for (const RankPlacement& p : job.placements) j["gpus"].push_back(p.gpu);
  const NumaBinding& binding = comm->numaBinding;
  j["placement"] = {{"numa", job.placements[static_cast<size_t>(comm->rank)].numa},
                    {"bound", binding.active()},
                    {"cpus", binding.cpus()},
                    {"why_not", binding.reason()}};
  j["host_model"] = modelJson(*comm->tuner);
  j["device_model"] = modelJson(*comm->deviceTuner);
  j["settings"] = nlohmann::ordered_json::array();
  for (const SettingOrigin& o : comm->settings.origins)
    j["settings"].push_back({{"name", specOf(o.id).name}, {"value", o.value}, {"source", o.source}});
  return j;
}

void reportJobTopology(const loomComm* comm) {
  const SystemGraph& host = *comm->hostGraph;
  const JobTopology& job = *comm->job;
  if (logEnabled(LogLevel::Info, LogSubsys::Graph)) {
    if (comm->rank == 0) {
      LOOM_INFO(Graph, "{}: {} host(s), topology {}", comm->describe(), job.hosts(), host.source);
      for (size_t c = 0; c < job.rings.size(); ++c) LOOM_INFO(Graph, "ring {}: {}", c, joined(job.rings[c]));
      for (size_t c = 0; c < std::min<size_t>(job.rings.size(), 2); ++c)
        LOOM_INFO(Graph, "tree {} (parents by rank): {}", c,
                  joined(allReduceTreeParents(job.rings[c], static_cast<int>(c))));
    }
    std::string transports;
    for (int peer = 0; peer < job.nranks; ++peer)
      transports += fmt::format("{}{}:{}", peer ? " " : "", peer, transportName(comm, peer));
    const RankPlacement& me = job.placements[static_cast<size_t>(comm->rank)];
    const NumaBinding& binding = comm->numaBinding;
    LOOM_INFO(Graph, "{}: GPU {}, NUMA {} ({}), NIC {}; transports {}", comm->describe(), me.gpu, me.numa,
              binding.active() ? "progress thread and FIFOs bound, CPUs " + binding.cpus() : "not bound: " + binding.reason(),
              usedNic(job, comm->rank).empty() ? "none" : usedNic(job, comm->rank), transports);
  }
  if (settingIsSet(Setting::GraphDumpFile))
    writeFor(comm, Setting::GraphDumpFile, topologyReport(comm).dump(2) + "\n");
  if (settingIsSet(Setting::TopoDumpFile)) {
    std::string xml;
    const Status written = writeNcclXml(host, &xml);
    if (written.ok())
      writeFor(comm, Setting::TopoDumpFile, xml);
    else
      LOOM_WARN(Graph, "{}: LOOM_TOPO_DUMP_FILE: {}", comm->describe(), written.message());
  }
}

}  // namespace loom
