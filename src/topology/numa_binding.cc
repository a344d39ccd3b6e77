#include "topology/numa_binding.h"

#include <hwloc.h>

#include <memory>
#include <mutex>

#include "base/env.h"
#include "base/log.h"

namespace loom {
namespace {

struct BitmapFree {
  void operator()(hwloc_bitmap_t b) const { hwloc_bitmap_free(b); }
};
using Bitmap = std::unique_ptr<hwloc_bitmap_s, BitmapFree>;

// This machine's CPUs and NUMA nodes only (no I/O: under a millisecond), loaded once per process and
// only by processes that bind. Kept for the process's lifetime: binding calls need it.
hwloc_topology_t bindingTopology() {
  static std::once_flag once;
  static hwloc_topology_t topology = nullptr;
  std::call_once(once, [] {
    hwloc_topology_t t;
    if (hwloc_topology_init(&t) != 0) return;
    hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_NONE);
    if (hwloc_topology_load(t) != 0) {
      hwloc_topology_destroy(t);
      return;
    }
    topology = t;
  });
  return topology;
}

std::string listOf(hwloc_const_bitmap_t set) {
  char* text = nullptr;
  if (hwloc_bitmap_list_asprintf(&text, set) < 0 || !text) return "";
  std::string list = text;
  free(text);
  return list;
}

}  // namespace

NumaBinding NumaBinding::forNode(int numaOsIndex, bool liveGraph) {
  NumaBinding b;
  if (envInt("LOOM_IGNORE_CPU_AFFINITY", 0) == 1) {
    b.reason_ = "LOOM_IGNORE_CPU_AFFINITY=1";
    return b;
  }
  if (!liveGraph) {
    b.reason_ = "the topology came from a file, not from this machine";
    return b;
  }
  if (numaOsIndex < 0) {
    b.reason_ = "the rank's NUMA node is unknown";
    return b;
  }
  hwloc_topology_t topology = bindingTopology();
  if (!topology) {
    b.reason_ = "hwloc could not load this machine's topology";
    return b;
  }
  hwloc_obj_t node = hwloc_get_numanode_obj_by_os_index(topology, static_cast<unsigned>(numaOsIndex));
  if (!node || !node->cpuset) {
    b.reason_ = fmt::format("NUMA node {} is not on this machine", numaOsIndex);
    return b;
  }
  // The CPUs the calling thread may use: what a new thread would inherit (a launcher's binding).
  Bitmap allowed(hwloc_bitmap_alloc());
  if (hwloc_get_cpubind(topology, allowed.get(), HWLOC_CPUBIND_THREAD) != 0) {
    b.reason_ = "the calling thread's CPUs cannot be read";
    return b;
  }
  Bitmap cpus(hwloc_bitmap_alloc());
  hwloc_bitmap_and(cpus.get(), node->cpuset, allowed.get());
  if (hwloc_bitmap_iszero(cpus.get())) hwloc_bitmap_copy(cpus.get(), allowed.get());
  b.node_ = numaOsIndex;
  b.cpuList_ = listOf(cpus.get());
  b.reason_.clear();
  return b;
}

void NumaBinding::bindThisThread() const {
  if (!active()) return;
  Bitmap cpus(hwloc_bitmap_alloc());
  if (hwloc_bitmap_list_sscanf(cpus.get(), cpuList_.c_str()) != 0 ||
      hwloc_set_cpubind(bindingTopology(), cpus.get(), HWLOC_CPUBIND_THREAD) != 0)
    LOOM_INFO(Init, "could not bind a thread to CPUs {} of NUMA node {}; it runs where it was", cpuList_, node_);
}

void NumaBinding::preferMemory(void* p, size_t bytes) const {
  if (!active() || !p || bytes == 0) return;
  hwloc_topology_t topology = bindingTopology();
  hwloc_obj_t node = hwloc_get_numanode_obj_by_os_index(topology, static_cast<unsigned>(node_));
  // Not strict: the node first, other nodes when it is full (Linux's preferred policy).
  if (!node || hwloc_set_area_membind(topology, p, bytes, node->nodeset, HWLOC_MEMBIND_BIND,
                                      HWLOC_MEMBIND_BYNODESET) != 0)
    LOOM_INFO(Init, "could not prefer NUMA node {} for {} bytes; they go where they are first touched", node_, bytes);
}

}  // namespace loom
