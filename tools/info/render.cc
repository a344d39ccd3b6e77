#include "render.h"

#include <fmt/format.h>

#include <iterator>

namespace loom::info_tool {
namespace {

using json = nlohmann::ordered_json;

template <typename... Args>
void line(std::string* out, fmt::format_string<Args...> format, Args&&... args) {
  fmt::format_to(std::back_inserter(*out), format, std::forward<Args>(args)...);
  out->push_back('\n');
}

std::string joined(const json& list, const char* separator = " ") {
  std::string s;
  for (const json& v : list) s += (s.empty() ? "" : separator) + (v.is_string() ? v.get<std::string>() : v.dump());
  return s;
}

std::string orNone(const std::string& text) { return text.empty() ? "none" : text; }

void renderBuild(std::string* out, const json& b) {
  line(out, "Loom {} ({} build, {})", b["version"].get<std::string>(), b["build_type"].get<std::string>(),
       b["compiler"].get<std::string>());
  if (b["cuda"].get<bool>())
    line(out, "  CUDA            built with nvcc {}: {}", b["cuda_compiler"].get<std::string>(), joined(b["cuda_code"]));
  else
    line(out, "  CUDA            not built in (host memory only)");
  line(out, "  net providers   {}", joined(b["net_providers"], ", "));
}

void renderCuda(std::string* out, const json& c) {
  if (!c["usable"].get<bool>()) {
    line(out, "  CUDA here       not usable: {}", c["why_not"].get<std::string>());
    return;
  }
  line(out, "  CUDA here       {} device(s)", c["devices"].size());
  for (const json& d : c["devices"]) line(out, "    device {:<3} {}", d["index"].get<int>(), d["bus_id"].get<std::string>());
}

void renderTopology(std::string* out, const json& t) {
  line(out, "");
  line(out, "Topology ({})", t["source"].get<std::string>());
  for (const json& n : t["numa"])
    line(out, "  NUMA{:<3} CPUs {}", n["id"].get<int>(), n["cpus"].get<std::string>().empty() ? "N/A" : n["cpus"].get<std::string>());
  if (t["gpus"].empty()) line(out, "  no GPUs");
  for (const json& g : t["gpus"]) {
    const int nic = g["closest_nic"].get<int>();
    line(out, "  GPU{:<3} {}  {}sm{}  NUMA {}  closest NIC: {}", g["index"].get<int>(), g["bus_id"].get<std::string>(),
         g["model"].get<std::string>().empty() ? "" : g["model"].get<std::string>() + "  ", g["sm"].get<int>(),
         g["numa"].get<int>(), nic >= 0 ? fmt::format("NIC{} ({})", nic, g["nic_path"].get<std::string>()) : "none");
  }
  if (t["nics"].empty()) line(out, "  no NICs in the topology");
  for (const json& n : t["nics"]) {
    const double gbs = n["speed_gbs"].get<double>();
    line(out, "  NIC{:<3} {:<16} {:<14} {}  NUMA {}{}", n["index"].get<int>(), n["name"].get<std::string>(),
         n["bus_id"].get<std::string>().empty() ? "-" : n["bus_id"].get<std::string>(),
         gbs > 0 ? fmt::format("{:.1f} GB/s", gbs) : "speed unknown", n["numa"].get<int>(),
         n["gdr"].get<bool>() ? "  GPUDirect RDMA" : "");
  }
}

void renderRings(std::string* out, const json& r) {
  line(out, "");
  line(out, "Rings for {} rank(s) of this host: {} channel(s), worst path {}{}", r["ranks"].get<int>(),
       r["channels"].get<size_t>(), r["worst_path"].get<std::string>(),
       r["ring_busbw_gbs"].get<double>() > 0 ? fmt::format(", allreduce bus bandwidth {:.1f} GB/s",
                                                           r["ring_busbw_gbs"].get<double>())
                                             : "");
  size_t c = 0;
  for (const json& ring : r["rings"]) line(out, "  ring {:<3} {}", c++, joined(ring));
  if (r.contains("device_model")) {
    const json& d = r["device_model"];
    line(out, "  device model    {:.0f} GB/s per rank into the fabric ({} rank(s) per GPU, GPU copy {}), lanes of "
              "{:.0f} GB/s in parallel, {:.1f} us per step, {:.1f} us per launch",
         d["intra_gbs"].get<double>(), d["ranks_per_gpu"].get<int>(),
         d["gpu_copy_gbs"].get<double>() > 0 ? fmt::format("{:.0f} GB/s, {}", d["gpu_copy_gbs"].get<double>(),
                                                            d["gpu_copy_source"].get<std::string>())
                                              : d["gpu_copy_source"].get<std::string>(),
         d["lane_gbs"].get<double>(), d["step_us"].get<double>(), d["launch_us"].get<double>());
  }
  std::string placed;
  int rank = 0;
  for (const json& p : r["placement"]) {
    const int gpu = p["gpu"].get<int>();
    placed += fmt::format("{}{}:{}", placed.empty() ? "" : "  ", rank++,
                          gpu >= 0 ? fmt::format("GPU{}", gpu) : fmt::format("NUMA{}", p["numa"].get<int>()));
  }
  line(out, "  ranks stand for {}", placed);
}

void renderAlgorithms(std::string* out, const json& algorithms) {
  line(out, "");
  line(out, "Algorithms (LOOM_ALGO: one, or rules [collective:][lo-hi:]algorithm,...; the tuner tries them in "
            "this order)");
  for (const json& a : algorithms) {
    const std::string needs = a["needs"].get<std::string>();
    line(out, "  {:<9} {}{}", a["name"].get<std::string>(), joined(a["collectives"], ", "),
         needs.empty() ? "" : "; needs " + needs);
    line(out, "  {:<9} {}", "", a["description"].get<std::string>());
  }
}

// The default choice's order, from the table.
std::string providerOrder(const json& providers) {
  std::string names;
  for (const json& p : providers) names += (names.empty() ? "" : ", ") + p["name"].get<std::string>();
  return names;
}

void renderProviders(std::string* out, const json& providers) {
  line(out, "");
  std::string words;
  for (const json& p : providers)
    if (!p["by_plugin_name"].get<bool>()) words += (words.empty() ? "" : ", ") + p["name"].get<std::string>();
  line(out, "Network providers (LOOM_NET: {}, or a plugin's name)", words);
  for (const json& p : providers)
    line(out, "  {:<9} {}", p["name"].get<std::string>(),
         p["compiled_in"].get<bool>() ? p["description"].get<std::string>()
                                      : "not in this build: " + p["missing"].get<std::string>());
}

void renderNetwork(std::string* out, const json& n, const json& providers) {
  line(out, "");
  const std::string requested = n["requested"].get<std::string>();
  if (n.contains("error")) {
    line(out, "Network provider (LOOM_NET={}): cannot start: {}", requested, n["error"].get<std::string>());
    return;
  }
  line(out, "Network provider between hosts: {} ({})", n["provider"].get<std::string>(),
       requested.empty() ? "LOOM_NET unset: the first that starts of " + providerOrder(providers) : "LOOM_NET=" + requested);
  for (const json& why : n["passed_over"]) line(out, "  passed over     {}", why.get<std::string>());
  for (const json& d : n["devices"]) {
    const int mbps = d["speed_mbps"].get<int>();
    line(out, "  device          {:<16} {:<12} {}{}", d["name"].get<std::string>(),
         mbps > 0 ? fmt::format("{} Mb/s", mbps) : "speed unknown", orNone(d["link_layer"].get<std::string>()),
         d["gpu_memory"].get<bool>() ? "  GPU memory" : "");
  }
}

}  // namespace

std::string renderFacts(const json& facts) {
  std::string out;
  renderBuild(&out, facts["loom"]);
  renderCuda(&out, facts["cuda"]);
  renderTopology(&out, facts["topology"]);
  renderRings(&out, facts["rings"]);
  renderAlgorithms(&out, facts["algorithms"]);
  renderProviders(&out, facts["providers"]);
  if (facts.contains("network")) renderNetwork(&out, facts["network"], facts["providers"]);
  line(&out, "");
  const json& c = facts["calibration"];
  if (c.contains("error"))
    line(&out, "Calibration: {}", c["error"].get<std::string>());
  else
    line(&out, "Calibration: host memory through a FIFO {:.3g} GB/s ({})", c["copy_gbs"].get<double>(),
         c["source"].get<std::string>());
  line(&out, "Cache: {}", orNone(facts["cache_dir"].get<std::string>()));
  int changed = 0;
  for (const json& s : facts["settings"]) changed += s["source"] != "default";
  line(&out, "Settings: {} of {} set in the environment or a settings file (loom-info --settings lists them all)",
       changed, facts["settings"].size());
  for (const json& s : facts["settings"])
    if (s["source"] != "default")
      line(&out, "  {}={} ({})", s["name"].get<std::string>(), s["value"].get<std::string>(),
           s["source"].get<std::string>());
  std::string found;
  for (const json& f : facts["settings_files"])
    if (f["found"].get<bool>()) found += (found.empty() ? "" : ", ") + f["path"].get<std::string>();
  line(&out, "Settings files: {}", found.empty() ? "none found" : found);
  return out;
}

namespace {

std::string renderSettingsFiles(const json& files) {
  std::string out;
  line(&out, "");
  line(&out, "Settings files, below the environment, the first listed winning over the later:");
  for (const json& f : files) {
    const std::string named = f["named_by"].get<std::string>();
    std::string state = f["error"].get<std::string>();
    if (state.empty()) state = f["found"].get<bool>() ? fmt::format("{} value(s)", f["values"].get<size_t>()) : "absent";
    line(&out, "  {}  {} names{}: {}", f["path"].get<std::string>(), f["holds"].get<std::string>(),
         named.empty() ? "" : ", named by " + named, state);
  }
  return out;
}

}  // namespace

std::string renderSettings(const json& settings, const json& files) {
  std::string out;
  size_t width = 0;
  for (const json& s : settings) width = std::max(width, s["name"].get<std::string>().size());
  line(&out, "{:<{}}  {:<12} {:<12} {:<12} {}", "setting", width, "value", "default", "source", "meaning");
  for (const json& s : settings) {
    std::string value = s["value"].get<std::string>(), deflt = s["default"].get<std::string>();
    line(&out, "{:<{}}  {:<12} {:<12} {:<12} {}", s["name"].get<std::string>(), width, value.empty() ? "-" : value,
         deflt.empty() ? "-" : deflt, s["source"].get<std::string>(), s["meaning"].get<std::string>());
  }
  return out + renderSettingsFiles(files);
}

}  // namespace loom::info_tool
