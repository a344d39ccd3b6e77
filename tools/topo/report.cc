#include "report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace loom::topo_tool {
namespace {

int numaOf(const SystemGraph& g, int node) {
  int cpu = g.cpuOf(node);
  return cpu >= 0 ? g.node(cpu).numaId : -1;
}

std::string cpusOf(const SystemGraph& g, int node) {
  int cpu = g.cpuOf(node);
  return cpu >= 0 && !g.node(cpu).cpuList.empty() ? g.node(cpu).cpuList : "N/A";
}

template <typename... Args>
void append(std::string* out, fmt::format_string<Args...> format, Args&&... args) {
  fmt::format_to(std::back_inserter(*out), format, std::forward<Args>(args)...);
}

std::string gbs(double value) { return fmt::format("{:.1f}", value); }

// GPUs then NICs: the rows and columns of the matrices.
struct Endpoint {
  int node;
  std::string label;
};

std::vector<Endpoint> endpoints(const SystemGraph& g) {
  std::vector<Endpoint> out;
  for (int i = 0; i < g.gpuCount(); ++i) out.push_back({g.gpus()[static_cast<size_t>(i)], fmt::format("GPU{}", i)});
  for (int i = 0; i < g.nicCount(); ++i) out.push_back({g.nics()[static_cast<size_t>(i)], fmt::format("NIC{}", i)});
  return out;
}

void matrix(std::string* out, const SystemGraph& g, const std::vector<Endpoint>& ends, bool bandwidth) {
  size_t width = 7, cpuWidth = 14;
  for (const Endpoint& e : ends) cpuWidth = std::max(cpuWidth, cpusOf(g, e.node).size() + 2);
  fmt::format_to(std::back_inserter(*out), "{:<{}}", "", width);
  for (const Endpoint& e : ends) fmt::format_to(std::back_inserter(*out), "{:>{}}", e.label, width);
  if (!bandwidth) fmt::format_to(std::back_inserter(*out), "  {:<{}}{}", "CPU Affinity", cpuWidth, "NUMA Affinity");
  out->push_back('\n');
  for (const Endpoint& row : ends) {
    fmt::format_to(std::back_inserter(*out), "{:<{}}", row.label, width);
    for (const Endpoint& col : ends) {
      const Path& p = g.path(row.node, col.node);
      std::string cell = row.node == col.node ? "X"
                         : !p.exists()        ? "-"
                         : bandwidth          ? gbs(p.bwGbs)
                                              : pathTypeName(p.type);
      fmt::format_to(std::back_inserter(*out), "{:>{}}", cell, width);
    }
    if (!bandwidth) {
      int numa = numaOf(g, row.node);
      fmt::format_to(std::back_inserter(*out), "  {:<{}}{}", cpusOf(g, row.node), cpuWidth,
                     numa >= 0 ? std::to_string(numa) : "N/A");
    }
    out->push_back('\n');
  }
}

std::string joined(const std::vector<int>& order) {
  std::string s;
  for (int v : order) s += fmt::format("{}{}", s.empty() ? "" : " ", v);
  return s;
}

}  // namespace

std::string renderText(const SystemGraph& g, const GpuChannels& ch) {
  std::string out;
  append(&out, "Topology of {}{}\n\n", g.source, g.hostName.empty() ? "" : " (host " + g.hostName + ")");
  append(&out, "CPUs\n");
  for (int cpu : g.cpus()) {
    const Node& n = g.node(cpu);
    append(&out, "  NUMA{:<3} CPUs {:<20} {} {}\n", n.numaId, n.cpuList.empty() ? "N/A" : n.cpuList, n.arch, n.vendor);
  }
  std::vector<Endpoint> ends = endpoints(g);
  if (g.gpuCount() == 0) append(&out, "\nNo GPUs found.\n");
  if (!ends.empty()) {
    append(&out, "\nPath classes\n");
    matrix(&out, g, ends, false);
    append(&out, "\nBottleneck bandwidth (GB/s per direction)\n");
    matrix(&out, g, ends, true);
  }
  if (g.gpuCount() > 0) {
    append(&out, "\nGPUs\n");
    for (int i = 0; i < g.gpuCount(); ++i) {
      const Node& n = g.node(g.gpus()[static_cast<size_t>(i)]);
      int nic = g.closestNic(i);
      append(&out, "  GPU{:<3} {}  {}{}  closest NIC: {}\n", i, n.busId, n.model.empty() ? "" : n.model + "  ",
          n.sm ? fmt::format("sm{}", n.sm) : "sm?",
          nic >= 0 ? fmt::format("NIC{} ({})", nic, pathTypeName(g.gpuNicPath(i, nic).type)) : "none");
    }
  }
  if (g.nicCount() > 0) {
    append(&out, "\nNICs\n");
    for (int i = 0; i < g.nicCount(); ++i) {
      const Node& n = g.node(g.nics()[static_cast<size_t>(i)]);
      append(&out, "  NIC{:<3} {:<16} {:<14} {}\n", i, n.name, n.busId.empty() ? "-" : n.busId,
          n.speedGbs > 0 ? gbs(n.speedGbs) + " GB/s" : "speed unknown");
    }
  }
  if (g.gpuCount() > 1) {
    append(&out, "\nRings: {} channel(s) at {} GB/s each; predicted allreduce bus bandwidth {} GB/s\n", ch.rings.size(),
        gbs(ch.ringChannelGbs), gbs(ch.ringBusGbs));
    for (size_t r = 0; r < ch.rings.size(); ++r) append(&out, "  ring {:<3} {}\n", r, joined(ch.rings[r]));
    append(&out, "Trees (heap order: root first, parent of position p at (p-1)/2), slowest edge {} GB/s\n", gbs(ch.treeGbs));
    for (size_t t = 0; t < ch.trees.size(); ++t) append(&out, "  tree {:<3} {}\n", t, joined(ch.trees[t]));
  }
  if (!ends.empty()) {
    append(&out, "\nLegend:\n"
        "  X   = Self\n"
        "  NVL = NVLink, directly or through NVSwitches\n"
        "  NVB = NVLink through one other GPU\n"
        "  PIX = at most one PCIe switch\n"
        "  PXB = several PCIe switches, no CPU\n"
        "  PHB = a CPU's PCIe host bridge\n"
        "  SYS = the interconnect between CPUs (QPI/UPI, Infinity Fabric)\n");
  }
  return out;
}

nlohmann::ordered_json renderJson(const SystemGraph& g, const GpuChannels& ch) {
  using json = nlohmann::ordered_json;
  json doc;
  doc["source"] = g.source;
  doc["host"] = g.hostName;
  doc["cpus"] = json::array();
  for (int cpu : g.cpus()) {
    const Node& n = g.node(cpu);
    doc["cpus"].push_back({{"numa", n.numaId}, {"cpus", n.cpuList}, {"arch", n.arch}, {"vendor", n.vendor}});
  }
  doc["gpus"] = json::array();
  for (int i = 0; i < g.gpuCount(); ++i) {
    int id = g.gpus()[static_cast<size_t>(i)];
    const Node& n = g.node(id);
    doc["gpus"].push_back({{"index", i}, {"bus_id", n.busId}, {"cuda_dev", n.cudaDev}, {"model", n.model},
                           {"sm", n.sm}, {"numa", numaOf(g, id)}, {"cpus", cpusOf(g, id)},
                           {"closest_nic", g.closestNic(i)}});
  }
  doc["nics"] = json::array();
  for (int i = 0; i < g.nicCount(); ++i) {
    int id = g.nics()[static_cast<size_t>(i)];
    const Node& n = g.node(id);
    doc["nics"].push_back({{"index", i}, {"name", n.name}, {"bus_id", n.busId}, {"speed_gbs", n.speedGbs},
                           {"gdr", n.gdr}, {"numa", numaOf(g, id)}});
  }
  auto cell = [](const Path& p) { return json{{"type", pathTypeName(p.type)}, {"bw_gbs", p.bwGbs}}; };
  doc["paths"] = json::array();
  doc["gpu_nic_paths"] = json::array();
  for (int a = 0; a < g.gpuCount(); ++a) {
    json row = json::array(), nicRow = json::array();
    for (int b = 0; b < g.gpuCount(); ++b) row.push_back(cell(g.gpuPath(a, b)));
    for (int b = 0; b < g.nicCount(); ++b) nicRow.push_back(cell(g.gpuNicPath(a, b)));
    doc["paths"].push_back(row);
    doc["gpu_nic_paths"].push_back(nicRow);
  }
  doc["rings"] = ch.rings;
  doc["ring_channel_gbs"] = ch.ringChannelGbs;
  doc["ring_busbw_gbs"] = ch.ringBusGbs;
  doc["trees"] = ch.trees;
  doc["tree_gbs"] = ch.treeGbs;
  return doc;
}

}  // namespace loom::topo_tool
