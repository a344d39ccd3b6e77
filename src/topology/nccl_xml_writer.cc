#include <pugixml.hpp>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <sstream>

#include "base/log.h"
#include "topology/cpu_mask.h"
#include "topology/hardware.h"
#include "topology/nccl_xml.h"

namespace loom {
namespace {

std::string hex16(unsigned value) { return fmt::format("0x{:04x}", value); }

// NCCL only understands the standard speed strings ("8 GT/s"); pick the standard link closest to the
// bandwidth Loom holds.
void setLinkAttributes(pugi::xml_node xml, double gbs) {
  static const double speeds[] = {2.5, 5, 8, 16, 32, 64};
  static const int widths[] = {16, 8, 4, 2, 1, 32};  // ties (8 GT/s x32 = 16 GT/s x16) go to x16
  double bestSpeed = 8, bestError = INFINITY;
  int bestWidth = 16;
  for (int w : widths)
    for (double s : speeds) {
      double error = std::abs(pciLinkGbs(s, w) - gbs);
      if (error < bestError - 1e-6) bestError = error, bestSpeed = s, bestWidth = w;
    }
  xml.append_attribute("link_speed") = fmt::format("{:g} GT/s", bestSpeed).c_str();
  xml.append_attribute("link_width") = bestWidth;
}

class NcclXmlWriter {
 public:
  explicit NcclXmlWriter(const SystemGraph& graph) : g_(graph) {}

  void write(pugi::xml_node system) {
    system.append_attribute("version") = 1;
    size_t maskWords = 1;  // NCCL gives every CPU's mask the same width
    for (int cpu : g_.cpus())
      if (auto mask = cpuListToNcclMask(g_.node(cpu).cpuList)) maskWords = std::max(maskWords, (mask->size() + 1) / 9);
    for (int cpu : g_.cpus()) {
      const Node& n = g_.node(cpu);
      pugi::xml_node xml = system.append_child("cpu");
      xml.append_attribute("numaid") = n.numaId;
      if (auto mask = cpuListToNcclMask(n.cpuList, maskWords)) xml.append_attribute("affinity") = mask->c_str();
      if (!n.arch.empty()) xml.append_attribute("arch") = n.arch.c_str();
      if (!n.vendor.empty()) xml.append_attribute("vendor") = n.vendor.c_str();
      if (n.cpuFamily) xml.append_attribute("familyid") = n.cpuFamily;
      if (n.cpuModel) xml.append_attribute("modelid") = n.cpuModel;
      writeChildren(xml, cpu);
    }
  }

 private:
  std::vector<int> pciChildren(int parent) const {
    std::vector<int> out;
    for (int link : g_.linksOf(parent)) {
      const Link& l = g_.links()[static_cast<size_t>(link)];
      if (l.kind == LinkKind::Pci && l.a == parent) out.push_back(l.b);
    }
    return out;
  }

  pugi::xml_node pciElement(pugi::xml_node parentXml, const Node& n, uint32_t fallbackClass) {
    pugi::xml_node xml = parentXml.append_child("pci");
    xml.append_attribute("busid") = n.busId.c_str();
    xml.append_attribute("class") = fmt::format("0x{:04x}00", n.pciClass ? n.pciClass : fallbackClass).c_str();
    if (n.vendorId) xml.append_attribute("vendor") = hex16(n.vendorId).c_str();
    if (n.deviceId) xml.append_attribute("device") = hex16(n.deviceId).c_str();
    if (n.subVendorId) xml.append_attribute("subsystem_vendor") = hex16(n.subVendorId).c_str();
    if (n.subDeviceId) xml.append_attribute("subsystem_device") = hex16(n.subDeviceId).c_str();
    setLinkAttributes(xml, n.pciLinkGbs > 0 ? n.pciLinkGbs : kDefaultPciGbs);
    return xml;
  }

  void writeChildren(pugi::xml_node parentXml, int parent) {
    std::vector<int> children = pciChildren(parent);
    std::vector<bool> done(children.size(), false);
    for (size_t i = 0; i < children.size(); ++i) {
      if (done[i]) continue;
      const Node& n = g_.node(children[i]);
      switch (n.kind) {
        case NodeKind::PciSwitch: {
          pugi::xml_node xml = pciElement(parentXml, n, kPciClassBridge);
          const Node& up = g_.node(parent);
          // The reader merges a bridge carrying exactly its parent's ids into the parent, as NCCL does
          // for Broadcom switches; Loom's own distinct switches must not read back merged.
          if (up.kind == NodeKind::PciSwitch && up.vendorId == n.vendorId && up.deviceId == n.deviceId &&
              up.subVendorId == n.subVendorId && up.subDeviceId == n.subDeviceId) {
            xml.remove_attribute("subsystem_vendor");
            xml.remove_attribute("subsystem_device");
          }
          writeChildren(xml, children[i]);
          break;
        }
        case NodeKind::Gpu: writeGpu(pciElement(parentXml, n, kPciClass3d), children[i]); break;
        case NodeKind::Nic: {
          // Ports of one adapter share its PCI function: one <pci><nic> with a <net> per port.
          pugi::xml_node nicXml = n.busId.empty() ? parentXml.append_child("nic")
                                                  : pciElement(parentXml, n, kPciClassEthernet).append_child("nic");
          for (size_t j = i; j < children.size(); ++j) {
            const Node& port = g_.node(children[j]);
            if (port.kind != NodeKind::Nic || port.busId != n.busId || (n.busId.empty() && j != i)) continue;
            writeNet(nicXml, port);
            done[j] = true;
          }
          break;
        }
        default: break;
      }
    }
  }

  void writeNet(pugi::xml_node nicXml, const Node& n) {
    pugi::xml_node net = nicXml.append_child("net");
    net.append_attribute("name") = n.name.c_str();
    net.append_attribute("dev") = n.nicIndex;
    net.append_attribute("speed") = static_cast<long long>(std::llround(n.speedGbs * 8000.0));
    net.append_attribute("port") = 1;
    net.append_attribute("gdr") = n.gdr ? 1 : 0;
  }

  void writeGpu(pugi::xml_node pciXml, int id) {
    const Node& n = g_.node(id);
    pugi::xml_node gpu = pciXml.append_child("gpu");
    gpu.append_attribute("dev") = n.cudaDev >= 0 ? n.cudaDev : n.gpuIndex;
    gpu.append_attribute("sm") = n.sm;
    gpu.append_attribute("rank") = n.gpuIndex;
    gpu.append_attribute("gdr") = n.gdr ? 1 : 0;
    struct Entry {
      std::string tclass, target;
      int count;
      double gbs;
    };
    std::vector<Entry> entries;
    for (int linkId : g_.linksOf(id)) {
      const Link& link = g_.links()[static_cast<size_t>(linkId)];
      if (link.kind != LinkKind::NvLink) continue;
      const Node& remote = g_.node(g_.otherEnd(linkId, id));
      if (remote.kind == NodeKind::Gpu) {
        entries.push_back({"0x030200", remote.busId, link.count, link.bwGbs});
      } else if (remote.kind == NodeKind::NvSwitch) {
        std::string target = remote.switchBusIds.empty() ? "ffff:ff:00.0" : remote.switchBusIds.front();
        entries.push_back({"0x068000", target, link.count, link.bwGbs});
      } else if (remote.kind == NodeKind::Cpu) {
        // NCCL links it to the GPU's own CPU and does not read the target.
        entries.push_back({"0x068001", "", link.count, link.bwGbs});
      }
    }
    // A stable order (GPUs, switches, CPU), whatever order the links were made in.
    std::sort(entries.begin(), entries.end(),
              [](const Entry& a, const Entry& b) { return std::tie(a.tclass, a.target) < std::tie(b.tclass, b.target); });
    for (const Entry& e : entries) {
      pugi::xml_node nv = gpu.append_child("nvlink");
      nv.append_attribute("target") = e.target.c_str();
      nv.append_attribute("count") = e.count;
      nv.append_attribute("tclass") = e.tclass.c_str();
      nv.append_attribute("loom_gbs") = e.gbs;
    }
  }

  const SystemGraph& g_;
};

}  // namespace

Status writeNcclXml(const SystemGraph& graph, std::string* out) {
  if (!out) return invalidArgument("writeNcclXml: null output");
  if (graph.cpus().empty()) return invalidArgument("writeNcclXml: the graph has no CPU (not finalized?)");
  pugi::xml_document doc;
  NcclXmlWriter(graph).write(doc.append_child("system"));
  std::ostringstream text;
  doc.save(text, "  ", pugi::format_indent | pugi::format_no_declaration);
  *out = text.str();
  return Status::Ok();
}

}  // namespace loom
