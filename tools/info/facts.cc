#include "facts.h"

#include <fmt/format.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/collective_words.h"
#include "algorithms/machine_model.h"
#include "algorithms/registry.h"
#include "base/settings.h"
#include "base/settings_files.h"
#include "core/build_info.h"
#include "device/device_layer.h"
#include "topology/calibration.h"
#include "topology/host_cache.h"
#include "topology/job_topology.h"
#include "topology/topology_file.h"
#include "transport/net/provider_choice.h"
#include "transport/net/provider_table.h"

namespace loom::info_tool {
namespace {

using json = nlohmann::ordered_json;

std::string firstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// A network device's link layer, from sysfs: an RDMA device's port says it; a network interface's
// ARP hardware type tells Ethernet from IPoIB. "" when neither knows the name (a plugin's device).
std::string linkLayerOf(const std::string& name, int port) {
  const std::string rdma = firstLine(fmt::format("/sys/class/infiniband/{}/ports/{}/link_layer", name, port > 0 ? port : 1));
  if (!rdma.empty()) return rdma;
  const std::string type = firstLine(fmt::format("/sys/class/net/{}/type", name));
  if (type == "1") return "Ethernet";
  if (type == "32") return "InfiniBand";
  if (type == "772") return "loopback";
  return type.empty() ? "" : "ARP type " + type;
}

int numaOf(const SystemGraph& g, int node) {
  const int cpu = g.cpuOf(node);
  return cpu >= 0 ? g.node(cpu).numaId : -1;
}

json buildFacts() {
  const BuildInfo& b = buildInfo();
  return json{{"version", b.version},
              {"build_type", b.buildType},
              {"compiler", b.compiler},
              {"cuda", b.cuda},
              {"cuda_compiler", b.cudaCompiler},
              {"cuda_code", b.cudaCode},
              {"net_providers", b.netProviders}};
}

json cudaFacts() {
  json j{{"usable", device::cudaUsable()}, {"devices", json::array()}, {"why_not", device::unusableReason()}};
  for (int d = 0; d < device::deviceCount(); ++d) j["devices"].push_back({{"index", d}, {"bus_id", device::busIdOf(d)}});
  return j;
}

json topologyFacts(const SystemGraph& g) {
  json j{{"source", g.source}, {"host", g.hostName}};
  j["numa"] = json::array();
  for (int cpu : g.cpus()) {
    const Node& n = g.node(cpu);
    j["numa"].push_back({{"id", n.numaId}, {"cpus", n.cpuList}, {"arch", n.arch}, {"vendor", n.vendor}});
  }
  j["gpus"] = json::array();
  for (int i = 0; i < g.gpuCount(); ++i) {
    const int id = g.gpus()[static_cast<size_t>(i)];
    const Node& n = g.node(id);
    const int nic = g.closestNic(i);
    j["gpus"].push_back({{"index", i},
                         {"bus_id", n.busId},
                         {"model", n.model},
                         {"sm", n.sm},
                         {"numa", numaOf(g, id)},
                         {"closest_nic", nic},
                         {"nic_path", nic >= 0 ? pathTypeName(g.gpuNicPath(i, nic).type) : ""}});
  }
  j["nics"] = json::array();
  for (int i = 0; i < g.nicCount(); ++i) {
    const int id = g.nics()[static_cast<size_t>(i)];
    const Node& n = g.node(id);
    j["nics"].push_back({{"index", i}, {"name", n.name}, {"bus_id", n.busId}, {"speed_gbs", n.speedGbs},
                         {"gdr", n.gdr}, {"numa", numaOf(g, id)}});
  }
  return j;
}

// The provider a communicator spanning hosts would make with these settings, and why the ones tried
// before it were passed over.
json networkFacts() {
  const std::string requested = settingText(Setting::Net);
  json j{{"requested", requested}};
  std::unique_ptr<net::Provider> provider;
  std::vector<std::string> passedOver;
  const Status made = net::makeProvider({requested, settingText(Setting::SocketIfname)}, &provider, &passedOver);
  j["passed_over"] = passedOver;
  if (!made.ok()) {
    j["provider"] = "";
    j["error"] = made.message();
    return j;
  }
  j["provider"] = provider->name();
  j["devices"] = json::array();
  for (int d = 0; d < provider->deviceCount(); ++d) {
    net::DeviceProperties p;
    if (!provider->deviceProperties(d, &p).ok()) continue;
    j["devices"].push_back({{"name", p.name},
                            {"port", p.port},
                            {"speed_mbps", p.speedMbps},
                            {"link_layer", linkLayerOf(p.name, p.port)},
                            {"pci_path", p.pciPath},
                            {"gpu_memory", (p.ptrSupport & net::kCudaPointers) != 0}});
  }
  return j;
}

// The network providers' table (transport/net/provider_table.h), in the default choice's order.
json providerFacts() {
  json all = json::array();
  for (const net::ProviderKind& kind : net::providerKinds())
    all.push_back({{"name", kind.name},
                   {"by_plugin_name", kind.anyOtherName},
                   {"compiled_in", kind.compiledIn},
                   {"description", kind.description},
                   {"missing", kind.compiledIn ? "" : kind.missing}});
  return all;
}

// The algorithm registry (algorithms/registry.h), in the tuner's order: what LOOM_ALGO can name.
json algorithmFacts() {
  json all = json::array();
  for (const AlgorithmEntry& entry : algorithmRegistry()) {
    json collectives = json::array();
    for (Collective c : kWordedCollectives)
      if (entry.collectives.has(c)) collectives.push_back(collectiveWord(c));
    all.push_back({{"name", entry.name},
                   {"collectives", collectives},
                   {"needs", entry.needs},
                   {"description", entry.description}});
  }
  return all;
}

json ringFacts(const SystemGraph& g, int ranks, double copyGbs, Status* status) {
  JobTopology job;
  *status = modelJob(g, ranks, 0, copyGbs, &job);
  if (!status->ok()) return json{};
  json j{{"ranks", ranks}, {"channels", job.rings.size()}, {"rings", job.rings}};
  j["ring_busbw_gbs"] = job.ringGbs;
  j["worst_path"] = pathTypeName(job.worstPath);
  json placement = json::array();
  for (const RankPlacement& p : job.placements) placement.push_back({{"gpu", p.gpu}, {"numa", p.numa}});
  j["placement"] = placement;
  // The machine a communicator of these ranks prices plan kernels on (its device tuner); ranks sharing a
  // GPU divide its copy rate, measured here as a communicator's setup measures it.
  if (g.gpuCount() > 0) {
    double gpuCopyGbs = static_cast<double>(settingInt(Setting::GpuCopyGbs));
    std::string source = "LOOM_GPU_COPY_GBS";
    if (gpuCopyGbs <= 0 && ranksPerGpu(job) > 1) {
      gpuCopyGbs = device::gpuCopyRateGbs(0);
      source = gpuCopyGbs > 0 ? "measured on CUDA device 0" : fmt::format("assumed ({:.0f} GB/s)", kGpuCopyGbsUnknown);
    } else if (gpuCopyGbs <= 0) {
      source = "not used: no GPU is shared";
    }
    const MachineModel m = jobMachine(job, MemorySide::Device, GpuSharing{gpuCopyGbs, 0});
    j["device_model"] = {{"ranks_per_gpu", ranksPerGpu(job)},
                         {"gpu_copy_gbs", gpuCopyGbs},
                         {"gpu_copy_source", source},
                         {"intra_gbs", m.intraGbs},
                         {"intra_latency_us", m.intraLatencyUs},
                         {"lane_gbs", m.copyGbs},
                         {"step_us", m.stepUs},
                         {"launch_us", m.launchUs}};
  }
  return j;
}

}  // namespace

json settingsFacts() {
  static const char* const kKinds[] = {"text", "integer", "flag", "choice"};
  json all = json::array();
  for (const SettingSpec& spec : allSettings()) {
    all.push_back({{"name", spec.name},
                   {"value", settingEffective(spec.id)},
                   {"default", spec.defaultText},
                   {"source", settingSource(spec.id)},
                   {"kind", kKinds[static_cast<int>(spec.kind)]},
                   {"allowed", spec.allowed},
                   {"subsystem", spec.subsystem},
                   {"meaning", spec.meaning},
                   {"nccl", spec.nccl},
                   {"nccl_read", spec.ncclUse == NcclUse::Honoured || spec.ncclUse == NcclUse::Translated}});
  }
  return all;
}

json settingsFilesFacts() {
  json all = json::array();
  for (const SettingsFile& file : settingsFiles()) {
    size_t values = 0;  // lines NAME=VALUE with a value
    for (const ConfEntry& e : file.conf.entries) values += !e.value.empty();
    all.push_back({{"path", file.location.path},
                   {"holds", file.location.kind == SettingsFileKind::Loom ? "LOOM_*" : "NCCL_*"},
                   {"named_by", file.location.namedBy},
                   {"found", file.exists},
                   {"values", values},
                   {"error", file.readError.message()}});
  }
  return all;
}

Status gatherFacts(const Request& request, json* out) {
  json doc;
  doc["loom"] = buildFacts();
  doc["cuda"] = cudaFacts();

  std::shared_ptr<const SystemGraph> graph;
  LOOM_TRY(hostTopology(&graph).withContext("the topology"));
  doc["topology"] = topologyFacts(*graph);
  doc["cache_dir"] = hostCacheDir();

  Calibration calibration;
  if (Status c = processCalibration(&calibration); c.ok())
    doc["calibration"] = {{"copy_gbs", calibration.copyGbs}, {"source", calibration.source}};
  else
    doc["calibration"] = {{"error", c.message()}};

  const int ranks = request.ranks > 0 ? request.ranks : graph->gpuCount() > 0 ? graph->gpuCount() : 2;
  Status ringStatus;
  doc["rings"] = ringFacts(*graph, ranks, calibration.copyGbs, &ringStatus);
  LOOM_TRY(ringStatus.withContext(fmt::format("rings for {} ranks", ranks)));

  doc["algorithms"] = algorithmFacts();
  doc["providers"] = providerFacts();
  if (request.network) doc["network"] = networkFacts();
  doc["settings"] = settingsFacts();
  doc["settings_files"] = settingsFilesFacts();
  *out = std::move(doc);
  return Status::Ok();
}

}  // namespace loom::info_tool
