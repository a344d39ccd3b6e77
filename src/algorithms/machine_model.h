// The machine the cost model times plans on: ranks grouped contiguously into nodes, every rank with a
// port into its node's fabric (NVSwitch-like: per rank and direction, any pair of ranks at that rate),
// every node with NICs that the ranks share by rail (local index), a latency per hop, and the
// executor's cost per step. Defaults are configured values for host memory over shared memory (intra)
// and TCP (inter); the core or loom-sim overwrite them from the topology, measurements or flags.
#pragma once

#include <cstdint>

#include "base/settings.h"
#include "base/status.h"
#include "base/tools_api.h"
#include "topology/graph.h"

namespace loom {

struct JobTopology;

// Microseconds to move `bytes` at `gbs` (GB/s = 1e9 bytes/s); 0 at a rate of 0, which the model reads
// as free (copyGbs's default).
inline double transferUs(double bytes, double gbs) { return gbs > 0 ? bytes / (gbs * 1e3) : 0.0; }

struct MachineModel {
  int nranks = 1;
  int ranksPerNode = 0;          // ranks of node i are i*ranksPerNode .. ; 0 (or >= nranks): one node
  double intraGbs = 20.0;        // per rank and direction into the node's fabric (GB/s = 1e9 bytes/s)
  double intraLatencyUs = 1.0;   // one message between ranks of one node
  int nicsPerNode = 1;
  double nicGbs = 12.5;          // per NIC and direction
  double netLatencyUs = 10.0;    // one message between nodes
  double stepUs = 0.2;           // executor time per step; a rank's steps run one at a time
  double copyGbs = 0.0;          // a rank's rate for the bytes of each step it executes; 0: free
  // Whether a rank's lanes run their steps side by side: false, one step of the rank at a time (a CPU
  // rank's executor thread); true, each lane on its own (on a GPU a lane is a thread block), copyGbs and
  // stepUs then being one lane's rate and cost per step, and the rank's port (intraGbs) their sum's cap.
  bool lanesInParallel = false;
  // Once per operation, before any rank's first step: a kernel launch and its start on the GPU, with
  // the host's work per call (device memory); 0 for host memory, whose per-call cost is in stepUs.
  double launchUs = 0.0;
  int fifoSlots = static_cast<int>(settingDefaultInt(Setting::FifoSlots));  // messages in flight per connection
  // A channel past the first only for operations that give each channel at least this many bytes (0:
  // any). The model counts a lane's steps but not what interleaving lanes costs a CPU rank (cache
  // misses on another FIFO's flags and data); measured, extra channels only pay for large messages.
  uint64_t minChannelBytes = 0;
  // The ranks can read and write each other's buffers (device plan kernels of rank threads of one
  // process on one GPU, or of rank processes on one GPU for buffers in windows: core's window tuner):
  // the peer-memory algorithms are candidates (PlanRequest::peerMemory).
  bool peerMemory = false;

  int ranksInNode() const { return ranksPerNode <= 0 || ranksPerNode > nranks ? nranks : ranksPerNode; }
  int nodes() const { return (nranks + ranksInNode() - 1) / ranksInNode(); }
  int nodeOf(int rank) const { return rank / ranksInNode(); }
  int localOf(int rank) const { return rank % ranksInNode(); }
  // The NIC (0..nicsPerNode-1) a rank's inter-node traffic uses: NICs serve contiguous local ranks.
  int nicOf(int rank) const { return static_cast<int>(static_cast<int64_t>(localOf(rank)) * nicsPerNode / ranksInNode()); }
  bool sameNode(int a, int b) const { return nodeOf(a) == nodeOf(b); }
  // Shifting every rank by this many maps the machine onto itself (all ranks of one node are alike,
  // and so are all nodes when they are full); nranks when no shift does.
  int symmetryShift() const;

  Status validate() const;
};

// Configured defaults for nranks ranks, ranksPerNode per node (0: unknown, one node).
MachineModel defaultMachine(int nranks, int ranksPerNode);

// Host memory over the shm/socket transports, as the core runs it: every step's bytes are copied by
// the CPU (copyGbs), so algorithms that move more bytes per rank (one-shot, tree) lose earlier than on
// a GPU fabric. Values measured with loom-perf and LOOM_TRACE_FILE on a 2-core x86-64 VM (256 KiB
// FIFO steps at ~12 GB/s, 8 B allreduce ~1.9 us for 2 ranks, a second channel paying from 32 MiB:
// 16 MiB per channel); see docs/PERFORMANCE.md.
MachineModel hostMemoryMachine(int nranks, int ranksPerNode);

// Which buffers a model times: host memory, which the CPU copies through shared memory or the network
// (what a communicator's host operations run on), or device memory over the GPU fabric (plan kernels).
enum class MemorySide { Host, Device };

// The machine of a job's topology (topology/job_topology.h): one function for a communicator's tuners and
// for loom-sim, so that both choose the same plans on the same topology.
// - Host: hostMemoryMachine's shape with the job's measured copy rate (topology/calibration.h) as copy
//   and intra-node rate, and across hosts the hosts' NICs (count, and speed where the topology knows it).
// - Device: the GPU fabric: intra-node rate = the host rings' bus bandwidth, latency per hop from the
//   worst path class between ring neighbours, the NICs across hosts; lanes in parallel, each at a
//   plan kernel's lane rate (kDeviceLaneGbs). Ranks that share a GPU share its copy rate: the GPU's
//   rate (`sharing.copyGbs`, which a communicator's plan-kernel setup measures; 0 unknown:
//   kGpuCopyGbsUnknown) divided among the most ranks on one GPU (`sharing.ranksPerGpu`, which that
//   setup knows from the CUDA devices; 0: ranksPerGpu(job), from the host graph) caps the rate.
// Nodes are the job's hosts when they hold equal contiguous blocks of ranks (else one node).
struct GpuSharing {
  double copyGbs = 0;   // the shared GPU's device-to-device copy rate, GB/s; 0 unknown
  int ranksPerGpu = 0;  // the most ranks on one GPU; 0 unknown
};
LOOM_TOOLS_API MachineModel jobMachine(const JobTopology& job, MemorySide side, const GpuSharing& sharing = {});

// A plan kernel's lane (one 512-thread block) copies at about 30 GB/s, measured on the first GPU run (one
// H100, docs/PERFORMANCE.md, "GPU"); NCCL's channels move 20-30 GB/s each over NVLink, which is why
// both split large operations over 16-32 of them. The copy rate assumed for a GPU whose rate was not
// measured is that run's device-to-device copy (1508 GB/s). The model's cost per step stays the lean
// protocol's (stepUs's default), not the 9 us today's FIFO handshake was measured at: the tuner
// chooses for the protocol as it is meant to run.
inline constexpr double kDeviceLaneGbs = 30.0;
inline constexpr double kGpuCopyGbsUnknown = 1508.0;

// The most ranks of the job placed on one GPU (same host, same GPU of its graph); 1 when none share.
LOOM_TOOLS_API int ranksPerGpu(const JobTopology& job);

// One message's latency over a path of this class, in microseconds: NCCL's per-hop ring latencies of its
// Simple protocol (NVLink 3.4, PCIe 5.7, network 14), and 1 for a GPU to itself.
double pathLatencyUs(PathType type);

// Refines a machine from one host's topology: the intra-node rate becomes the bus bandwidth of the
// channels the topology search finds (nccl-tests' ring allreduce busbw), and NICs come from the graph
// where the machine has none configured by the caller (nicsPerNode <= 0, nicGbs <= 0).
Status applyTopology(const SystemGraph& graph, MachineModel* machine);

}  // namespace loom
