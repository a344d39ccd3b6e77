#include "topology/numa_binding.h"

#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>

#include "base/settings.h"
#include "base/log.h"
#include "topology/cpu_mask.h"

namespace loom {
namespace {

constexpr int kMpolPreferred = 1;  // <linux/mempolicy.h>: this node first, others when it is full

// "0-3,8" -> set; false when the text is not a CPU list or names a CPU past the set's size.
bool cpuSetOf(const std::string& list, cpu_set_t* set) {
  CPU_ZERO(set);
  const std::optional<std::set<int>> cpus = parseCpuList(list);
  if (!cpus) return false;
  for (int c : *cpus) {
    if (c >= CPU_SETSIZE) return false;
    CPU_SET(c, set);
  }
  return true;
}

std::string listOf(const cpu_set_t& set) {
  std::string list;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &set)) continue;
    int last = c;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set)) ++last;
    list += (list.empty() ? "" : ",") + std::to_string(c) + (last > c ? "-" + std::to_string(last) : "");
    c = last;
  }
  return list;
}

}  // namespace

NumaBinding NumaBinding::forNode(const SystemGraph& host, int numaId) {
  NumaBinding b;
  if (settingFlag(Setting::IgnoreCpuAffinity)) {
    b.reason_ = "LOOM_IGNORE_CPU_AFFINITY=1";
    return b;
  }
  if (host.source != "live") {
    b.reason_ = "the topology came from the file " + host.source + ", not from this machine";
    return b;
  }
  if (numaId < 0) {
    b.reason_ = "the rank's NUMA node is unknown";
    return b;
  }
  const Node* node = nullptr;
  for (int id : host.cpus())
    if (host.node(id).numaId == numaId) node = &host.node(id);
  cpu_set_t nodeCpus, allowed, cpus;
  if (!node || !cpuSetOf(node->cpuList, &nodeCpus)) {
    b.reason_ = fmt::format("NUMA node {} has no CPU list in this machine's graph", numaId);
    return b;
  }
  // The CPUs the calling thread may use: what a new thread would inherit (a launcher's binding).
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
    b.reason_ = "the calling thread's CPUs cannot be read";
    return b;
  }
  CPU_AND(&cpus, &nodeCpus, &allowed);
  if (CPU_COUNT(&cpus) == 0) cpus = allowed;
  b.node_ = numaId;
  b.cpuList_ = listOf(cpus);
  b.reason_.clear();
  return b;
}

void NumaBinding::bindThisThread() const {
  if (!active()) return;
  cpu_set_t cpus;
  if (!cpuSetOf(cpuList_, &cpus) || pthread_setaffinity_np(pthread_self(), sizeof cpus, &cpus) != 0)
    LOOM_INFO(Init, "could not bind a thread to CPUs {} of NUMA node {}; it runs where it was", cpuList_, node_);
}

void NumaBinding::preferMemory(void* p, size_t bytes) const {
  if (!active() || !p || bytes == 0) return;
  constexpr size_t kMaskBits = sizeof(unsigned long) * CHAR_BIT;
  if (static_cast<size_t>(node_) >= kMaskBits) {
    LOOM_INFO(Init, "NUMA node {}: beyond the nodes Loom places memory on; the FIFOs go where first touched", node_);
    return;
  }
  const unsigned long mask = 1ul << node_;
  // The policy of a shared mapping goes with the shared-memory object: peers' touches follow it too.
  if (syscall(SYS_mbind, p, bytes, kMpolPreferred, &mask, kMaskBits, 0) != 0)
    LOOM_INFO(Init, "could not prefer NUMA node {} for {} bytes; they go where they are first touched", node_, bytes);
}

}  // namespace loom
