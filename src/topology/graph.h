// SystemGraph: one host's hardware as nodes (CPU/NUMA, PCI switch, GPU, NVSwitch fabric, NIC) joined by
// links with a per-direction bandwidth, plus the best path between every pair of endpoints. Importers
// (hwloc, NCCL XML, live discovery) add nodes and links and then call finalize(), which computes the
// paths; everything after that reads the graph only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/tools_api.h"

namespace loom {

enum class NodeKind : uint8_t { Cpu, PciSwitch, Gpu, NvSwitch, Nic };

enum class LinkKind : uint8_t {
  Pci,     // PCIe, device to switch or to its CPU's root complex
  NvLink,  // one or more NVLinks between GPUs, a GPU and the NVSwitch fabric, or a GPU and a CPU
  Sys,     // CPU to CPU interconnect (QPI/UPI, Infinity Fabric, X-Bus)
};

// Path classes, best first, with NCCL's names and meaning:
//   LOC same device; NVL NVLink, possibly through NVSwitches; NVB NVLink through one other GPU;
//   PIX at most one PCIe switch; PXB several PCIe switches, no CPU; PHB through a CPU's host bridge;
//   SYS across the CPU interconnect; NET between hosts.
enum class PathType : uint8_t { Loc, Nvl, Nvb, Pix, Pxb, Phb, Sys, Net };

LOOM_TOOLS_API const char* pathTypeName(PathType type);
const char* nodeKindName(NodeKind kind);
// NVL/NVB: the GPUs can reach each other's memory over NVLink.
inline bool isNvLinkClass(PathType type) { return type == PathType::Nvl || type == PathType::Nvb; }

struct Node {
  NodeKind kind = NodeKind::Cpu;
  std::string name;    // "NUMA0", "GPU3", "mlx5_0", "PCI 0000:0c:00.0", "NVSwitch"
  std::string busId;   // normalized PCI address "0000:0c:00.0"; empty when the node has none
  int cpu = -1;        // node id of the CPU/NUMA node this device hangs under (-1 for CPUs)

  // PCI identity, when known (GPUs, NICs, switches).
  uint32_t pciClass = 0;  // 16-bit class/subclass, e.g. 0x0302
  uint16_t vendorId = 0, deviceId = 0, subVendorId = 0, subDeviceId = 0;
  double pciLinkGbs = 0;  // this device's upstream PCIe link, GB/s per direction (0: unknown)

  // CPU/NUMA
  int numaId = -1;
  std::string cpuList;  // logical CPUs in list form, "0-31,64-95"
  std::string arch, vendor;
  int cpuFamily = 0, cpuModel = 0;

  // GPU
  int gpuIndex = -1;  // dense 0..nGpus-1, the order rings and trees refer to
  int cudaDev = -1;   // CUDA device number reported by the source, -1 when unknown
  int sm = 0;         // compute capability x10 (80 for A100); 0 when unknown
  std::string model;

  // NIC
  int nicIndex = -1;    // dense 0..nNics-1
  double speedGbs = 0;  // network port speed in GB/s (0: unknown)
  bool gdr = false;     // GPUDirect RDMA capable, as far as the source says

  // NVSwitch fabric: the bus ids of the switch chips merged into this node (NCCL merges them too).
  std::vector<std::string> switchBusIds;
};

// PCI links run from the upstream node (a) to the downstream one (b); the writers rely on it.
struct Link {
  int a = -1, b = -1;
  LinkKind kind = LinkKind::Pci;
  double bwGbs = 0;  // per direction
  int count = 1;     // NVLinks bundled into this link
};

// A directed use of a link: the link id and whether it is traversed from b to a.
struct LinkHop {
  int link = -1;
  bool reverse = false;
  int directedId() const { return 2 * link + (reverse ? 1 : 0); }
};

struct Path {
  PathType type = PathType::Sys;
  double bwGbs = 0;  // bottleneck bandwidth; 0 when there is no path
  std::vector<LinkHop> hops;
  bool exists() const { return bwGbs > 0; }
};

class SystemGraph {
 public:
  // Internal bandwidth reported for a device to itself (LOC), as NCCL does.
  static constexpr double kLocalGbs = 5000.0;

  std::string hostName;  // what the source calls the machine; informational
  std::string source;    // "live", or the file it was read from

  int addNode(Node node);
  int addLink(int a, int b, LinkKind kind, double bwGbs, int count = 1);
  // Adds bandwidth (and link count) to an existing link of that kind between a and b, or makes one.
  int addOrWidenLink(int a, int b, LinkKind kind, double bwGbs, int count = 1);

  // Numbers GPUs and NICs densely, checks the links and computes all paths. Call once, last.
  Status finalize();

  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<Link>& links() const { return links_; }
  const Node& node(int id) const { return nodes_.at(static_cast<size_t>(id)); }
  Node& mutableNode(int id) { return nodes_.at(static_cast<size_t>(id)); }
  const std::vector<int>& linksOf(int id) const { return adjacency_.at(static_cast<size_t>(id)); }
  int otherEnd(int link, int from) const;
  int findByBusId(const std::string& busId) const;  // -1 if absent

  // Node ids in index order: gpus()[i] has gpuIndex i.
  const std::vector<int>& gpus() const { return gpus_; }
  const std::vector<int>& nics() const { return nics_; }
  const std::vector<int>& cpus() const { return cpus_; }
  int gpuCount() const { return static_cast<int>(gpus_.size()); }
  int nicCount() const { return static_cast<int>(nics_.size()); }

  // Valid after finalize(). Paths start at a GPU, NIC or CPU; a path to a node that cannot be reached
  // has bwGbs 0.
  LOOM_TOOLS_API const Path& path(int fromNode, int toNode) const;
  const Path& gpuPath(int gpuA, int gpuB) const { return path(gpus_.at(gpuA), gpus_.at(gpuB)); }
  const Path& gpuNicPath(int gpu, int nic) const { return path(gpus_.at(gpu), nics_.at(nic)); }
  // The NIC a GPU uses for traffic that leaves the host: the best path class (then bandwidth) from it,
  // or -1 with no NIC. Where several NICs tie (two NICs behind the GPUs' PCIe switch, as on Azure's
  // NDv4), the GPUs that tie for the same NICs share them out in index order, one each, as NCCL
  // pairs them; without that every such GPU would crowd onto the first NIC.
  LOOM_TOOLS_API int closestNic(int gpu) const;
  // The NICs that tie for the best path from this GPU, in index order.
  std::vector<int> closestNics(int gpu) const;
  // The CPU/NUMA node a GPU or NIC is attached to, -1 if unknown.
  int cpuOf(int nodeId) const { return node(nodeId).cpu; }

 private:
  std::vector<Node> nodes_;
  std::vector<Link> links_;
  std::vector<std::vector<int>> adjacency_;
  std::vector<int> gpus_, nics_, cpus_;
  std::vector<Path> paths_;  // nodes_.size()^2, row = source
  bool finalized_ = false;
};

}  // namespace loom
