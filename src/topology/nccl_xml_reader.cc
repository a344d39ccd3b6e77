#include <pugixml.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>

#include "base/log.h"
#include "topology/cpu_mask.h"
#include "topology/hardware.h"
#include "topology/nccl_xml.h"

namespace loom {
namespace {

// NVLink target classes, 24-bit as NCCL writes them; a CPU is "other bridge" with prog-if 1.
constexpr uint32_t kTclassNvSwitch = 0x068000, kTclassCpu = 0x068001, kTclassPowerCpu = 0x0b4000;

// 24-bit class with programming interface ("0x030200"); a 16-bit "0x0302" gets prog-if 0.
uint32_t parseClass24(const char* text) {
  char* end = nullptr;
  unsigned long value = std::strtoul(text, &end, 16);
  if (end == text) return 0;
  size_t digits = static_cast<size_t>(end - text) - (std::strncmp(text, "0x", 2) == 0 ? 2 : 0);
  return static_cast<uint32_t>(digits <= 4 ? value << 8 : value);
}

uint32_t parseClass(const pugi::xml_node& node) { return parseClass24(node.attribute("class").as_string()) >> 8; }

uint16_t parseHex16(const pugi::xml_node& node, const char* name) {
  return static_cast<uint16_t>(std::strtoul(node.attribute(name).as_string(), nullptr, 16));
}

struct PendingNvlink {
  int gpu;
  std::string target;
  uint32_t tclass;
  int count;
  double gbs;  // 0: derive from count and the GPU's generation
};

class NcclXmlImporter {
 public:
  explicit NcclXmlImporter(SystemGraph* graph) : g_(graph) {}

  Status run(const pugi::xml_node& system) {
    int index = 0;
    for (pugi::xml_node cpuXml : system.children("cpu")) LOOM_TRY(addCpu(cpuXml, index++));
    if (cpuIds_.empty()) return invalidArgument("NCCL topology has no <cpu> element");
    for (size_t i = 0; i < cpuIds_.size(); ++i)
      for (size_t j = i + 1; j < cpuIds_.size(); ++j) {
        const Node& a = g_->node(cpuIds_[i]);
        g_->addLink(cpuIds_[i], cpuIds_[j], LinkKind::Sys,
                    cpuInterconnectGbs(a.arch, a.vendor, a.cpuFamily, a.cpuModel));
      }
    return resolveNvlinks();
  }

 private:
  Status addCpu(const pugi::xml_node& xml, int index) {
    Node cpu;
    cpu.kind = NodeKind::Cpu;
    cpu.numaId = xml.attribute("numaid").as_int(index);
    cpu.name = fmt::format("NUMA{}", cpu.numaId);
    if (auto list = ncclMaskToCpuList(xml.attribute("affinity").as_string())) cpu.cpuList = *list;
    cpu.arch = xml.attribute("arch").as_string();
    cpu.vendor = xml.attribute("vendor").as_string();
    cpu.cpuFamily = xml.attribute("familyid").as_int();
    cpu.cpuModel = xml.attribute("modelid").as_int();
    int id = g_->addNode(cpu);
    cpuIds_.push_back(id);
    for (pugi::xml_node child : xml.children()) {
      if (std::strcmp(child.name(), "pci") == 0) LOOM_TRY(addPci(child, id, id, false));
      if (std::strcmp(child.name(), "nic") == 0) addNics(child, Node{}, id, id);
    }
    return Status::Ok();
  }

  static double linkGbsOf(const pugi::xml_node& xml) {
    double gts = std::atof(xml.attribute("link_speed").as_string());  // "16 GT/s", "16.0 GT/s PCIe"
    double gbs = pciLinkGbs(gts, xml.attribute("link_width").as_int());
    return gbs > 0 ? gbs : kDefaultPciGbs;
  }

  // parentMerged: the parent <pci> itself joined its own parent's switch.
  Status addPci(const pugi::xml_node& xml, int attach, int cpu, bool parentMerged) {
    auto busId = normalizeBusId(xml.attribute("busid").as_string());
    if (!busId) return invalidArgument("<pci> with a bad busid \"{}\"", xml.attribute("busid").as_string());
    Node dev;
    dev.busId = *busId;
    dev.cpu = cpu;
    dev.pciClass = parseClass(xml);
    dev.vendorId = parseHex16(xml, "vendor");
    dev.deviceId = parseHex16(xml, "device");
    dev.subVendorId = parseHex16(xml, "subsystem_vendor");
    dev.subDeviceId = parseHex16(xml, "subsystem_device");
    dev.pciLinkGbs = linkGbsOf(xml);
    pugi::xml_node gpuXml = xml.child("gpu"), nicXml = xml.child("nic");

    if (gpuXml || isGpuClass(dev.pciClass)) {
      dev.kind = NodeKind::Gpu;
      dev.cudaDev = gpuXml.attribute("dev").as_int(-1);
      dev.sm = gpuXml.attribute("sm").as_int(0);
      dev.gdr = gpuXml.attribute("gdr").as_int(0) != 0;
      int id = g_->addNode(dev);
      g_->addLink(attach, id, LinkKind::Pci, dev.pciLinkGbs);
      for (pugi::xml_node nv : gpuXml.children("nvlink")) {
        pending_.push_back(PendingNvlink{id, nv.attribute("target").as_string(),
                                         parseClass24(nv.attribute("tclass").as_string()),
                                         std::max(1, nv.attribute("count").as_int(1)),
                                         nv.attribute("loom_gbs").as_double(0)});
      }
      return Status::Ok();
    }
    if (nicXml || isNetworkClass(dev.pciClass)) {
      addNics(nicXml, dev, attach, cpu);
      return Status::Ok();
    }
    if (dev.vendorId == kNvidiaVendor && dev.pciClass == kPciClassOtherBridge) return Status::Ok();  // NVSwitch
    if (!xml.child("pci")) return Status::Ok();  // a device Loom has no use for

    // A bridge: NCCL lists one per switch (upstream port). Like NCCL's flattening of Broadcom gen4
    // switches, a bridge with exactly its parent's ids is the same chip and joins it.
    int sw = attach;
    const Node& parent = g_->node(attach);
    bool joins = !parentMerged && parent.kind == NodeKind::PciSwitch && dev.vendorId != 0 &&
                 dev.vendorId == parent.vendorId && dev.deviceId == parent.deviceId &&
                 dev.subVendorId != 0 && dev.subVendorId == parent.subVendorId &&
                 dev.subDeviceId == parent.subDeviceId;
    if (!joins) {
      dev.kind = NodeKind::PciSwitch;
      dev.name = "PCI " + dev.busId;
      sw = g_->addNode(dev);
      g_->addLink(attach, sw, LinkKind::Pci, dev.pciLinkGbs);
    }
    for (pugi::xml_node child : xml.children("pci")) LOOM_TRY(addPci(child, sw, cpu, joins));
    for (pugi::xml_node child : xml.children("nic")) addNics(child, Node{}, sw, cpu);
    return Status::Ok();
  }

  // One NIC node per <net> port; a bare PCI network device becomes one NIC named by its address.
  void addNics(const pugi::xml_node& nicXml, Node dev, int attach, int cpu) {
    dev.kind = NodeKind::Nic;
    dev.cpu = cpu;
    if (dev.pciLinkGbs <= 0) dev.pciLinkGbs = kDefaultPciGbs;
    bool any = false;
    for (pugi::xml_node net : nicXml.children("net")) {
      Node port = dev;
      port.name = net.attribute("name").as_string();
      if (port.name.empty()) port.name = fmt::format("net{}", g_->nodes().size());
      port.nicIndex = net.attribute("dev").as_int(-1);
      double mbits = net.attribute("speed").as_double(0);
      port.speedGbs = mbits > 0 ? mbits / 8000.0 : 0;
      port.gdr = net.attribute("gdr").as_int(0) != 0;
      g_->addLink(attach, g_->addNode(port), LinkKind::Pci, port.pciLinkGbs);
      any = true;
    }
    if (!any) {
      dev.name = dev.busId.empty() ? fmt::format("NIC{}", g_->nodes().size()) : "NIC " + dev.busId;
      g_->addLink(attach, g_->addNode(dev), LinkKind::Pci, dev.pciLinkGbs);
    }
  }

  int fabric(const std::string& busId) {
    if (fabric_ < 0) {
      Node nvs;
      nvs.kind = NodeKind::NvSwitch;
      nvs.name = "NVSwitch";
      nvs.pciClass = kPciClassOtherBridge;
      fabric_ = g_->addNode(nvs);
    }
    auto& ids = g_->mutableNode(fabric_).switchBusIds;
    if (!busId.empty() && std::find(ids.begin(), ids.end(), busId) == ids.end()) ids.push_back(busId);
    return fabric_;
  }

  Status resolveNvlinks() {
    // Both GPUs of a direct link list it; keep one link per pair.
    std::map<std::pair<int, int>, std::pair<int, double>> gpuPairs;  // -> (count, GB/s)
    for (const PendingNvlink& nv : pending_) {
      const Node& gpu = g_->node(nv.gpu);
      double gbs = nv.gbs > 0 ? nv.gbs : nv.count * nvlinkGbsPerLink(gpu.sm);
      std::string target = normalizeBusId(nv.target).value_or("");
      int remote = g_->findByBusId(target);
      if (nv.tclass == kTclassCpu || nv.tclass == kTclassPowerCpu) {
        g_->addOrWidenLink(nv.gpu, gpu.cpu, LinkKind::NvLink, gbs, nv.count);
      } else if (remote >= 0 && g_->node(remote).kind == NodeKind::Gpu) {
        if (remote == nv.gpu) return invalidArgument("GPU {} has an NVLink to itself", gpu.busId);
        auto [it, inserted] = gpuPairs.emplace(std::minmax(nv.gpu, remote), std::make_pair(nv.count, gbs));
        if (!inserted && gbs > it->second.second) it->second = {nv.count, gbs};
      } else if (nv.tclass == kTclassNvSwitch || remote < 0) {
        g_->addOrWidenLink(nv.gpu, fabric(target), LinkKind::NvLink, gbs, nv.count);
      } else {
        LOOM_WARN(Topo, "ignoring NVLink from {} to {} (class {:#x})", gpu.busId, nv.target, nv.tclass);
      }
    }
    for (const auto& [pair, link] : gpuPairs)
      g_->addLink(pair.first, pair.second, LinkKind::NvLink, link.second, link.first);
    return Status::Ok();
  }

  SystemGraph* g_;
  std::vector<int> cpuIds_;
  std::vector<PendingNvlink> pending_;
  int fabric_ = -1;
};

}  // namespace

Status importNcclXml(const std::string& xml, SystemGraph* graph) {
  pugi::xml_document doc;
  pugi::xml_parse_result parsed = doc.load_buffer(xml.data(), xml.size());
  if (!parsed) return invalidArgument("not well-formed XML at byte {}: {}", parsed.offset, parsed.description());
  pugi::xml_node system = doc.document_element();
  if (std::strcmp(system.name(), "system") != 0)
    return invalidArgument("not an NCCL topology: root element is <{}>, expected <system>", system.name());
  return NcclXmlImporter(graph).run(system);
}

}  // namespace loom
