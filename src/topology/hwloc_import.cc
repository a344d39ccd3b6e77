#include "topology/hwloc_import.h"

#include <hwloc.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>

#include "base/log.h"
#include "topology/hardware.h"

namespace loom {
namespace {

using PciAttr = hwloc_obj_attr_u::hwloc_pcidev_attr_s;

std::string info(hwloc_obj_t obj, const char* name) {
  const char* value = obj ? hwloc_obj_get_info_by_name(obj, name) : nullptr;
  return value ? value : "";
}

std::string busIdOf(const PciAttr& pci) {
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", static_cast<unsigned>(pci.domain), pci.bus, pci.dev, pci.func);
}

bool startsWithIndex(const char* name, const char* prefix, int* index) {
  size_t n = std::strlen(prefix);
  if (!name || std::strncmp(name, prefix, n) != 0 || name[n] < '0' || name[n] > '9') return false;
  *index = std::atoi(name + n);
  return true;
}

// Port speed of a live NIC from sysfs, in GB/s; 0 when unknown.
double sysfsNicSpeedGbs(const std::string& ibDevice, const std::string& netDevice) {
  if (!ibDevice.empty()) {
    std::ifstream rate("/sys/class/infiniband/" + ibDevice + "/ports/1/rate");  // "200 Gb/sec (4X HDR)"
    double gbits = 0;
    if (rate >> gbits && gbits > 0) return gbits / 8.0;
  }
  if (!netDevice.empty()) {
    std::ifstream speed("/sys/class/net/" + netDevice + "/speed");  // Mb/s, -1 when the link is down
    double mbits = 0;
    if (speed >> mbits && mbits > 0) return mbits / 8000.0;
  }
  return 0;
}

class HwlocImporter {
 public:
  HwlocImporter(hwloc_topology_t topo, const HwlocImportOptions& options, SystemGraph* graph)
      : topo_(topo), options_(options), g_(graph) {}

  Status run() {
    if (g_->hostName.empty()) g_->hostName = info(hwloc_get_root_obj(topo_), "HostName");
    addCpus();
    for (hwloc_obj_t os = nullptr; (os = hwloc_get_next_osdev(topo_, os)) != nullptr;)
      if (isCudaOsdev(os)) haveCudaOsdevs_ = true;
    walkNormal(hwloc_get_root_obj(topo_));
    addCpuInterconnect();
    addNvlinkDistances();
    return Status::Ok();
  }

 private:
  enum class Level { NonIo, HostBridge, RootPort, Switch };
  struct Context {
    int attach = -1;  // graph node that devices at this level link to
    Level level = Level::NonIo;
    hwloc_obj_t switchObj = nullptr;  // the bridge that made or joined `attach`
    bool merged = false;              // switchObj joined its parent's switch
  };

  static bool isCudaOsdev(hwloc_obj_t os) {
    int index = 0;
    return startsWithIndex(os->name, "cuda", &index) || startsWithIndex(os->name, "nvml", &index);
  }

  void addCpus() {
    std::string arch = info(hwloc_get_root_obj(topo_), "Architecture");
    for (hwloc_obj_t numa = nullptr; (numa = hwloc_get_next_obj_by_type(topo_, HWLOC_OBJ_NUMANODE, numa));) {
      if (!numa->cpuset || hwloc_bitmap_iszero(numa->cpuset)) continue;  // GPU or CXL memory, no cores
      Node cpu;
      cpu.kind = NodeKind::Cpu;
      cpu.numaId = static_cast<int>(numa->os_index);
      cpu.name = fmt::format("NUMA{}", cpu.numaId);
      char* list = nullptr;
      if (hwloc_bitmap_list_asprintf(&list, numa->cpuset) >= 0 && list) cpu.cpuList = list;
      std::free(list);
      hwloc_obj_t package = hwloc_get_ancestor_obj_by_type(topo_, HWLOC_OBJ_PACKAGE, numa);
      cpu.arch = arch;
      cpu.vendor = info(package, "CPUVendor");
      cpu.cpuFamily = std::atoi(info(package, "CPUFamilyNumber").c_str());
      cpu.cpuModel = std::atoi(info(package, "CPUModelNumber").c_str());
      cpuNodes_.emplace_back(numa->os_index, g_->addNode(cpu));
    }
    if (cpuNodes_.empty()) {  // no NUMA information at all: one CPU for the machine
      Node cpu;
      cpu.kind = NodeKind::Cpu;
      cpu.numaId = 0;
      cpu.name = "NUMA0";
      cpu.arch = arch;
      cpuNodes_.emplace_back(0u, g_->addNode(cpu));
    }
  }

  // The CPU node for a normal object: the first NUMA node in its nodeset.
  int cpuFor(hwloc_obj_t obj) {
    for (; obj; obj = obj->parent)
      if (obj->nodeset && !hwloc_bitmap_iszero(obj->nodeset))
        for (auto& [os, node] : cpuNodes_)
          if (hwloc_bitmap_isset(obj->nodeset, os)) return node;
    return cpuNodes_.front().second;
  }

  void addCpuInterconnect() {
    for (size_t i = 0; i < cpuNodes_.size(); ++i)
      for (size_t j = i + 1; j < cpuNodes_.size(); ++j) {
        const Node& a = g_->node(cpuNodes_[i].second);
        double bw = cpuInterconnectGbs(a.arch, a.vendor, a.cpuFamily, a.cpuModel);
        g_->addLink(cpuNodes_[i].second, cpuNodes_[j].second, LinkKind::Sys, bw);
      }
  }

  void walkNormal(hwloc_obj_t obj) {
    for (hwloc_obj_t child = obj->first_child; child; child = child->next_sibling) walkNormal(child);
    Context ctx;
    for (hwloc_obj_t io = obj->io_first_child; io; io = io->next_sibling) {
      ctx.attach = cpuFor(obj);
      walkIo(io, ctx);
    }
  }

  static double linkGbs(const PciAttr& pci) {
    return pci.linkspeed > 0 ? static_cast<double>(pci.linkspeed) : kDefaultPciGbs;
  }

  void walkIo(hwloc_obj_t obj, const Context& ctx) {
    if (obj->type == HWLOC_OBJ_PCI_DEVICE) {
      addPciDevice(obj, ctx);
      return;
    }
    if (obj->type != HWLOC_OBJ_BRIDGE || !containsEndpoint(obj)) return;
    Context child = ctx;
    if (obj->attr->bridge.upstream_type != HWLOC_OBJ_BRIDGE_PCI) {
      child.level = Level::HostBridge;
    } else if (ctx.level == Level::NonIo || ctx.level == Level::HostBridge) {
      child.level = Level::RootPort;  // part of the CPU's root complex
    } else {
      const PciAttr& pci = obj->attr->bridge.upstream.pci;
      // A switch shows as its upstream port with one bridge per downstream port below it, all with the
      // same vendor:device; a bridge below a downstream port starts the next switch of a cascade.
      bool joinsParent = ctx.level == Level::Switch && !ctx.merged && ctx.switchObj &&
                         ctx.switchObj->attr->bridge.upstream.pci.vendor_id == pci.vendor_id &&
                         ctx.switchObj->attr->bridge.upstream.pci.device_id == pci.device_id;
      if (!joinsParent) {
        Node sw;
        sw.kind = NodeKind::PciSwitch;
        sw.busId = busIdOf(pci);
        sw.name = "PCI " + sw.busId;
        sw.cpu = g_->node(ctx.attach).kind == NodeKind::Cpu ? ctx.attach : g_->node(ctx.attach).cpu;
        sw.pciClass = pci.class_id;
        sw.vendorId = pci.vendor_id;
        sw.deviceId = pci.device_id;
        sw.subVendorId = pci.subvendor_id;
        sw.subDeviceId = pci.subdevice_id;
        sw.pciLinkGbs = linkGbs(pci);
        child.attach = g_->addNode(sw);
        g_->addLink(ctx.attach, child.attach, LinkKind::Pci, sw.pciLinkGbs);
      }
      child.level = Level::Switch;
      child.switchObj = obj;
      child.merged = joinsParent;
    }
    for (hwloc_obj_t io = obj->io_first_child; io; io = io->next_sibling) walkIo(io, child);
  }

  enum class DeviceRole { Other, Gpu, Nic };

  DeviceRole roleOf(hwloc_obj_t pcidev) const {
    bool network = false;
    for (hwloc_obj_t os = pcidev->io_first_child; os; os = os->next_sibling) {
      if (os->type != HWLOC_OBJ_OS_DEVICE) continue;
      if (isCudaOsdev(os)) return DeviceRole::Gpu;
      if (os->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK || os->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS)
        network = true;
    }
    const PciAttr& pci = pcidev->attr->pcidev;
    // Without CUDA/NVML OS devices (hwloc built without those backends) an NVIDIA display or 3D
    // controller is the best evidence of a GPU there is.
    if (!haveCudaOsdevs_ && pci.vendor_id == kNvidiaVendor && isGpuClass(pci.class_id)) return DeviceRole::Gpu;
    if (network || isNetworkClass(pci.class_id)) return DeviceRole::Nic;
    return DeviceRole::Other;
  }

  bool containsEndpoint(hwloc_obj_t obj) const {
    if (obj->type == HWLOC_OBJ_PCI_DEVICE) return roleOf(obj) != DeviceRole::Other;
    for (hwloc_obj_t io = obj->io_first_child; io; io = io->next_sibling)
      if (containsEndpoint(io)) return true;
    return false;
  }

  void addPciDevice(hwloc_obj_t obj, const Context& ctx) {
    DeviceRole role = roleOf(obj);
    if (role == DeviceRole::Other) return;
    const PciAttr& pci = obj->attr->pcidev;
    Node dev;
    dev.busId = busIdOf(pci);
    dev.cpu = g_->node(ctx.attach).kind == NodeKind::Cpu ? ctx.attach : g_->node(ctx.attach).cpu;
    dev.pciClass = pci.class_id;
    dev.vendorId = pci.vendor_id;
    dev.deviceId = pci.device_id;
    dev.subVendorId = pci.subvendor_id;
    dev.subDeviceId = pci.subdevice_id;
    dev.pciLinkGbs = linkGbs(pci);
    std::string ibName, netName;
    int cudaIndex = -1, nvmlIndex = -1;
    for (hwloc_obj_t os = obj->io_first_child; os; os = os->next_sibling) {
      if (os->type != HWLOC_OBJ_OS_DEVICE || !os->name) continue;
      int index = 0;
      if (startsWithIndex(os->name, "cuda", &index)) cudaIndex = index;
      if (startsWithIndex(os->name, "nvml", &index)) nvmlIndex = index;
      if (dev.model.empty()) dev.model = info(os, "GPUModel");
      if (os->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS && ibName.empty()) ibName = os->name;
      if (os->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK && netName.empty()) netName = os->name;
    }
    if (dev.model.empty()) dev.model = info(obj, "PCIDevice");
    if (role == DeviceRole::Gpu) {
      dev.kind = NodeKind::Gpu;
      dev.cudaDev = cudaIndex >= 0 ? cudaIndex : nvmlIndex;
      dev.sm = smFromGpuModel(dev.model);
    } else {
      dev.kind = NodeKind::Nic;
      dev.name = !ibName.empty() ? ibName : !netName.empty() ? netName : "NIC " + dev.busId;
      if (options_.readSysfsNicSpeeds) dev.speedGbs = sysfsNicSpeedGbs(ibName, netName);
      dev.gdr = !ibName.empty();
    }
    int id = g_->addNode(dev);
    g_->addLink(ctx.attach, id, LinkKind::Pci, dev.pciLinkGbs);
    pciNodes_[obj] = id;
  }

  // The graph node a distances object stands for: a GPU, the NVSwitch fabric, a CPU, or -1.
  int endpointFor(hwloc_obj_t obj) {
    if (obj->type == HWLOC_OBJ_OS_DEVICE) obj = obj->parent;
    if (!obj) return -1;
    if (obj->type == HWLOC_OBJ_PCI_DEVICE) {
      auto it = pciNodes_.find(obj);
      if (it != pciNodes_.end()) return g_->node(it->second).kind == NodeKind::Gpu ? it->second : -1;
      return fabricFor(obj);
    }
    if (obj->type == HWLOC_OBJ_BRIDGE || obj->type == HWLOC_OBJ_MISC) return -1;
    return cpuFor(obj);
  }

  // NVSwitch chips, like NCCL does, become one fabric node: every GPU reaches every other through it
  // with the sum of its NVLinks to any switch.
  int fabricFor(hwloc_obj_t obj) {
    if (fabric_ < 0) {
      Node nvs;
      nvs.kind = NodeKind::NvSwitch;
      nvs.name = "NVSwitch";
      nvs.pciClass = kPciClassOtherBridge;
      fabric_ = g_->addNode(nvs);
    }
    g_->mutableNode(fabric_).switchBusIds.push_back(busIdOf(obj->attr->pcidev));
    return fabric_;
  }

  void addNvlinkDistances() {
    unsigned count = 0;
    if (hwloc_distances_get_by_name(topo_, "NVLinkBandwidth", &count, nullptr, 0) != 0 || count == 0) return;
    std::vector<hwloc_distances_s*> matrices(count);
    if (hwloc_distances_get_by_name(topo_, "NVLinkBandwidth", &count, matrices.data(), 0) != 0) return;
    for (unsigned m = 0; m < count; ++m) {
      hwloc_distances_s* d = matrices[m];
      std::vector<int> ends(d->nbobjs);
      for (unsigned i = 0; i < d->nbobjs; ++i) ends[i] = d->objs[i] ? endpointFor(d->objs[i]) : -1;
      for (unsigned i = 0; i < d->nbobjs; ++i)
        for (unsigned j = i + 1; j < d->nbobjs; ++j) addNvlink(ends[i], ends[j], d->values[i * d->nbobjs + j],
                                                               d->values[j * d->nbobjs + i]);
      hwloc_distances_release(topo_, d);
    }
  }

  void addNvlink(int a, int b, uint64_t abMBs, uint64_t baMBs) {
    if (a < 0 || b < 0 || a == b) return;
    NodeKind ka = g_->node(a).kind, kb = g_->node(b).kind;
    if (ka != NodeKind::Gpu && kb != NodeKind::Gpu) return;  // switch-switch trunks, CPU-switch
    double gbs = static_cast<double>(std::max(abMBs, baMBs)) / 1000.0;
    if (!(gbs > 0)) return;
    const Node& gpu = g_->node(ka == NodeKind::Gpu ? a : b);
    int links = std::max(1, static_cast<int>(std::lround(gbs / nvlinkGbsPerLink(gpu.sm))));
    g_->addOrWidenLink(a, b, LinkKind::NvLink, gbs, links);
  }

  hwloc_topology_t topo_;
  HwlocImportOptions options_;
  SystemGraph* g_;
  std::vector<std::pair<unsigned, int>> cpuNodes_;  // NUMA os index -> CPU node
  std::map<hwloc_obj_t, int> pciNodes_;
  int fabric_ = -1;
  bool haveCudaOsdevs_ = false;
};

}  // namespace

void HwlocTopologyDeleter::operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }

Status addHwlocTopology(hwloc_topology* topology, const HwlocImportOptions& options, SystemGraph* graph) {
  return HwlocImporter(topology, options, graph).run();
}

Status importHwlocXml(const std::string& xml, SystemGraph* graph) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) return systemError("hwloc_topology_init failed");
  std::unique_ptr<hwloc_topology, HwlocTopologyDeleter> topo(raw);
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_ALL);
  // hwloc's buffer length counts the terminating NUL.
  if (hwloc_topology_set_xmlbuffer(raw, xml.c_str(), static_cast<int>(xml.size()) + 1) != 0)
    return invalidArgument("hwloc refused the XML buffer");
  if (hwloc_topology_load(raw) != 0)
    return invalidArgument("hwloc could not import this XML ({})", std::strerror(errno));
  return addHwlocTopology(raw, HwlocImportOptions{}, graph);
}

}  // namespace loom
