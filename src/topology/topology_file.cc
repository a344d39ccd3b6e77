#include "topology/topology_file.h"

#include <hwloc.h>

#include <pugixml.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

#include "base/settings.h"
#include "base/log.h"
#include "topology/discovery.h"
#include "topology/host_cache.h"
#include "topology/hwloc_import.h"
#include "topology/nccl_xml.h"

namespace loom {
namespace {

constexpr std::streamoff kMaxFileBytes = 256 << 20;  // real files are well under 1 MiB

Status checkHwlocVersion(const pugi::xml_node& root) {
  std::string version = root.attribute("version").as_string();
  if (version.empty()) return Status::Ok();  // hwloc 1.x wrote no version; hwloc 2 reads those files
  int major = std::atoi(version.c_str());
  if (major == 2) return Status::Ok();
  unsigned api = hwloc_get_api_version();
  return invalidArgument(
      "hwloc XML version {} is not supported: this Loom uses hwloc {}.{}, which reads XML versions 1 and 2 "
      "(export the file with hwloc 2.x's lstopo, or write an NCCL topology XML)",
      version, api >> 16, (api >> 8) & 0xff);
}

}  // namespace

const char* topologyFormatName(TopologyFormat format) {
  return format == TopologyFormat::HwlocXml ? "hwloc XML" : "NCCL topology XML";
}

Status parseTopologyXml(const std::string& xml, const std::string& sourceName, SystemGraph* graph,
                        TopologyFormat* format) {
  if (!graph) return invalidArgument("parseTopologyXml: null graph");
  if (!graph->nodes().empty()) return invalidArgument("parseTopologyXml: the graph is not empty");
  pugi::xml_document doc;
  pugi::xml_parse_result parsed = doc.load_buffer(xml.data(), xml.size());
  if (!parsed)
    return invalidArgument("{}: not a topology file: XML error at byte {}: {}", sourceName, parsed.offset,
                           parsed.description());
  pugi::xml_node root = doc.document_element();
  TopologyFormat detected;
  if (std::strcmp(root.name(), "topology") == 0) {
    detected = TopologyFormat::HwlocXml;
    LOOM_TRY(checkHwlocVersion(root).withContext(sourceName));
    LOOM_TRY(importHwlocXml(xml, graph).withContext(sourceName));
  } else if (std::strcmp(root.name(), "system") == 0) {
    detected = TopologyFormat::NcclXml;
    LOOM_TRY(importNcclXml(xml, graph).withContext(sourceName));
  } else {
    return invalidArgument("{}: not a topology file: root element <{}> is neither hwloc's <topology> nor "
                           "NCCL's <system>", sourceName, root.name());
  }
  graph->source = sourceName;
  LOOM_TRY(graph->finalize().withContext(sourceName));
  if (format) *format = detected;
  LOOM_INFO(Topo, "{}: {} with {} GPUs, {} NICs, {} CPUs", sourceName, topologyFormatName(detected),
            graph->gpuCount(), graph->nicCount(), graph->cpus().size());
  return Status::Ok();
}

Status loadTopologyFile(const std::string& path, SystemGraph* graph) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return invalidArgument("cannot open topology file {}: {}", path, std::strerror(errno));
  file.seekg(0, std::ios::end);
  std::streamoff size = file.tellg();
  if (size < 0 || size > kMaxFileBytes)
    return invalidArgument("{}: not a topology file (unreadable or larger than {} bytes)", path, kMaxFileBytes);
  file.seekg(0);
  std::string xml(static_cast<size_t>(size), '\0');
  if (!file.read(xml.data(), size)) return invalidArgument("cannot read topology file {}", path);
  return parseTopologyXml(xml, path, graph);
}

Status loadSystemTopology(SystemGraph* graph) {
  std::string path = settingText(Setting::TopoFile);
  if (!path.empty()) return loadTopologyFile(path, graph).withContext("LOOM_TOPO_FILE");
  return discoverLocalTopology(graph);
}

Status hostTopology(std::shared_ptr<const SystemGraph>* out) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const SystemGraph>> loaded;  // by LOOM_TOPO_FILE ("" live)
  const std::string key = settingText(Setting::TopoFile);
  std::lock_guard<std::mutex> lock(mutex);
  auto it = loaded.find(key);
  if (it == loaded.end()) {
    auto graph = std::make_shared<SystemGraph>();
    if (!key.empty()) {
      LOOM_TRY(loadTopologyFile(key, graph.get()).withContext("LOOM_TOPO_FILE"));
    } else if (!readCachedHostGraph(graph.get())) {
      // Every process of the host must see the same graph, whether it discovered it or read the cache:
      // the discovered graph is used as the cache holds it (through NCCL XML), and cached.
      SystemGraph live;
      LOOM_TRY(discoverLocalTopology(&live));
      std::string xml;
      LOOM_TRY(writeNcclXml(live, &xml));
      LOOM_TRY(parseTopologyXml(xml, "live", graph.get()));
      writeCachedHostGraph(*graph);
    }
    it = loaded.emplace(key, std::move(graph)).first;
  }
  *out = it->second;
  return Status::Ok();
}

}  // namespace loom
