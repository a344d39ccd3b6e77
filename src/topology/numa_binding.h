// A rank's own threads and memory on its NUMA node: the communicator's progress thread runs on the
// node's CPUs and its shared-memory FIFOs are allocated from the node's memory, so that copies in and
// out of them stay local. The node's CPUs come from the host graph (hwloc's discovery, cached per
// host); the binding itself is the kernel's thread affinity and memory policy calls, because loading
// hwloc's own topology for its binding calls would add about a millisecond to every process's first
// init. Only where the rank's place came from this machine's own graph (a topology file describes
// another machine, or one that ranks stand for) and unless LOOM_IGNORE_CPU_AFFINITY=1. Binding never
// fails a communicator: what cannot be bound is left as it was, and said at INFO.
#pragma once

#include <cstddef>
#include <string>

#include "topology/graph.h"

namespace loom {

class NumaBinding {
 public:
  NumaBinding() = default;  // binds nothing

  // The binding for NUMA node `numaId` of `host` (this machine's graph when host.source is "live"),
  // for a thread that would otherwise run on the calling thread's CPUs: the node's CPUs among those
  // (all of those when none is on the node, as NCCL does). Nothing when the graph came from a file,
  // the node is unknown (-1) or not in the graph, or LOOM_IGNORE_CPU_AFFINITY=1.
  static NumaBinding forNode(const SystemGraph& host, int numaId);

  bool active() const { return node_ >= 0; }
  int node() const { return node_; }
  // The CPUs a bound thread runs on, as a list ("0-7,16-23"); "" when inactive.
  const std::string& cpus() const { return cpuList_; }
  // Why it is inactive ("" when active), for the graph report.
  const std::string& reason() const { return reason_; }

  // Binds the calling thread to cpus(); a no-op when inactive.
  void bindThisThread() const;
  // Makes the node the preferred home of [p, p + bytes) (pages not yet touched, shared memory
  // included: the policy goes with the segment); a no-op when inactive.
  void preferMemory(void* p, size_t bytes) const;

 private:
  int node_ = -1;
  std::string cpuList_;
  std::string reason_ = "not set up";
};

}  // namespace loom
