#include "topology/nvml_links.h"

#include <dlfcn.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>

#include "base/log.h"
#include "topology/hardware.h"

namespace loom {
namespace {

// The subset of nvml.h Loom needs, with the ABI of NVML's versioned entry points.
using nvmlReturn_t = int;
constexpr nvmlReturn_t kNvmlSuccess = 0;
using nvmlDevice_t = struct nvmlDevice_st*;
using nvmlEnableState_t = int;  // NVML_FEATURE_ENABLED = 1
constexpr unsigned kNvmlMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS
struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};

struct NvmlApi {
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*getCount)(unsigned*) = nullptr;
  nvmlReturn_t (*getHandle)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*getPciInfo)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*getComputeCapability)(nvmlDevice_t, int*, int*) = nullptr;
  nvmlReturn_t (*getLinkState)(nvmlDevice_t, unsigned, nvmlEnableState_t*) = nullptr;
  nvmlReturn_t (*getRemotePciInfo)(nvmlDevice_t, unsigned, nvmlPciInfo_t*) = nullptr;
};

struct LibraryCloser {
  void operator()(void* handle) const { dlclose(handle); }
};

template <typename F>
bool bind(void* lib, const char* name, F* fn) {
  *fn = reinterpret_cast<F>(dlsym(lib, name));
  return *fn != nullptr;
}

std::string nvmlBusIdOf(const nvmlPciInfo_t& pci) {
  return normalizeBusId(pci.busId).value_or(normalizeBusId(pci.busIdLegacy).value_or(""));
}

// What is at the far end of an NVLink that is not one of the graph's GPUs, the way NCCL tells: the PCI
// class in sysfs (NVSwitch 0x068000, a GPU 0x03xxxx, else a CPU bridge such as IBM's 0x0680xx), or the
// vendor when sysfs does not say.
enum class Remote { Gpu, NvSwitch, Cpu };
Remote classifyRemote(const std::string& busId, unsigned pciDeviceId) {
  std::ifstream file("/sys/bus/pci/devices/" + busId + "/class");
  unsigned long pciClass = 0;
  if (file >> std::hex >> pciClass) {
    if ((pciClass >> 16) == 0x03) return Remote::Gpu;
    return pciClass == 0x068000 ? Remote::NvSwitch : Remote::Cpu;
  }
  return (pciDeviceId & 0xffff) == kNvidiaVendor ? Remote::NvSwitch : Remote::Cpu;
}

int fabricNode(SystemGraph* graph, const std::string& busId) {
  int fabric = -1;
  for (size_t i = 0; i < graph->nodes().size(); ++i)
    if (graph->nodes()[i].kind == NodeKind::NvSwitch) fabric = static_cast<int>(i);
  if (fabric < 0) {
    Node nvs;
    nvs.kind = NodeKind::NvSwitch;
    nvs.name = "NVSwitch";
    nvs.pciClass = kPciClassOtherBridge;
    fabric = graph->addNode(nvs);
  }
  auto& ids = graph->mutableNode(fabric).switchBusIds;
  if (!busId.empty() && std::find(ids.begin(), ids.end(), busId) == ids.end()) ids.push_back(busId);
  return fabric;
}

}  // namespace

Status addNvmlLinks(SystemGraph* graph) {
  std::unique_ptr<void, LibraryCloser> lib(dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL));
  if (!lib) {
    LOOM_INFO(Topo, "NVML not available ({}); no NVLink information", dlerror());
    return Status::Ok();
  }
  NvmlApi api;
  if (!bind(lib.get(), "nvmlInit_v2", &api.init) || !bind(lib.get(), "nvmlShutdown", &api.shutdown) ||
      !bind(lib.get(), "nvmlDeviceGetCount_v2", &api.getCount) ||
      !bind(lib.get(), "nvmlDeviceGetHandleByIndex_v2", &api.getHandle) ||
      !bind(lib.get(), "nvmlDeviceGetPciInfo_v3", &api.getPciInfo) ||
      !bind(lib.get(), "nvmlDeviceGetCudaComputeCapability", &api.getComputeCapability) ||
      !bind(lib.get(), "nvmlDeviceGetNvLinkState", &api.getLinkState) ||
      !bind(lib.get(), "nvmlDeviceGetNvLinkRemotePciInfo_v2", &api.getRemotePciInfo))
    return systemError("NVML lacks an entry point Loom needs (driver too old?)");
  if (api.init() != kNvmlSuccess) {
    LOOM_INFO(Topo, "nvmlInit failed; no NVLink information");
    return Status::Ok();
  }
  unsigned count = 0;
  if (api.getCount(&count) != kNvmlSuccess) count = 0;

  // Links between two GPUs are seen from both ends; count them from the lower node id only.
  for (unsigned d = 0; d < count; ++d) {
    nvmlDevice_t dev = nullptr;
    nvmlPciInfo_t pci{};
    if (api.getHandle(d, &dev) != kNvmlSuccess || api.getPciInfo(dev, &pci) != kNvmlSuccess) continue;
    int gpu = graph->findByBusId(nvmlBusIdOf(pci));
    if (gpu < 0 || graph->node(gpu).kind != NodeKind::Gpu) continue;
    int major = 0, minor = 0;
    if (api.getComputeCapability(dev, &major, &minor) == kNvmlSuccess) graph->mutableNode(gpu).sm = major * 10 + minor;
    double perLink = nvlinkGbsPerLink(graph->node(gpu).sm);
    std::map<int, int> linksTo;  // remote node -> link count
    for (unsigned l = 0; l < kNvmlMaxLinks; ++l) {
      nvmlEnableState_t active = 0;
      nvmlPciInfo_t remote{};
      if (api.getLinkState(dev, l, &active) != kNvmlSuccess || active != 1) continue;
      if (api.getRemotePciInfo(dev, l, &remote) != kNvmlSuccess) continue;
      std::string remoteBus = nvmlBusIdOf(remote);
      int peer = graph->findByBusId(remoteBus);
      if (peer >= 0 && graph->node(peer).kind == NodeKind::Gpu) {
        if (peer > gpu) ++linksTo[peer];
        continue;
      }
      switch (classifyRemote(remoteBus, remote.pciDeviceId)) {
        case Remote::Gpu: break;  // a GPU hwloc did not list: nothing to connect to
        case Remote::NvSwitch: ++linksTo[fabricNode(graph, remoteBus)]; break;
        case Remote::Cpu:  // NVLink to the CPU (POWER9)
          if (graph->node(gpu).cpu >= 0) ++linksTo[graph->node(gpu).cpu];
          break;
      }
    }
    for (auto [peer, links] : linksTo) graph->addOrWidenLink(gpu, peer, LinkKind::NvLink, links * perLink, links);
  }
  api.shutdown();
  return Status::Ok();
}

}  // namespace loom
