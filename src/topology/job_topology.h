// The job's topology: which ranks share a host, where each rank sits in its host's graph (the GPU it
// runs on or stands for, its NUMA node), the rings every channel follows across all ranks, and the NIC
// each rank and each channel uses. Built at a communicator's init from two small exchanges (core) or,
// for a modelled job, from one graph repeated per host (loom-sim); both run the same functions below,
// so a communicator and loom-sim reach the same rings and, from them, the same machine model.
//
// How it is built, deterministically, so that every rank reaches the same result:
// 1. Each rank places itself in its host's graph (placeRank) and tells every other (RankPlacement).
// 2. Each rank chooses its own host's channels (chooseHostChannels): rings over the host's ranks, from
//    the topology search over the GPUs they use (ranks sharing a GPU follow each other; ranks without
//    one are ordered by NUMA node), and, for jobs of several hosts, a rail ring per channel through
//    the host's NIC c mod NICs, entering at the rank whose NIC it is (else the closest). Every rank of
//    a host computes the same channels from the same facts and tells every other its part of it
//    (HostChannelRecord).
// 3. assembleJob joins the hosts: with one host, its search rings are the job's; otherwise channel c's
//    ring visits the hosts in order of their first rank, each through its rail ring c, so that a ring
//    crosses between hosts once per host and each channel through its own NIC.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/tools_api.h"
#include "topology/graph.h"

namespace loom {

inline constexpr int kMaxJobChannels = 16;  // rings a job keeps (the transports' channels are fewer)

// Step 1's message: a rank's place in its host's graph.
struct RankPlacement {
  uint64_t hostHash = 0;          // the bootstrap's host identity
  uint64_t graphFingerprint = 0;  // its host graph (where it came from and what it holds)
  int32_t gpu = -1;               // GPU index in the host graph it runs on or stands for; -1: none
  int32_t numa = -1;              // NUMA node id; -1 unknown
  int32_t cudaDevice = -1;        // the CUDA device it uses (-1: host memory, perhaps standing for a GPU)
  float copyGbs = 0;              // the host-memory copy rate it measured (topology/calibration.h); 0: none
};

// What placeRank needs to know of the rank beyond its host graph.
struct PlacementInputs {
  int localIndex = 0;          // its index among the ranks of its host, in rank order
  int cudaDevice = -1;         // the CUDA device it uses, -1 none
  std::string cudaBusId;       // that device's PCI bus id ("" when none)
  std::vector<int> gpuOverride;  // LOOM_TOPO_GPU: entry i is the GPU the host's i-th rank stands for
  std::string cpuList;         // the CPUs the process may run on ("0-15"), for its NUMA node
};

// Step 1. A rank with a CUDA device is placed on that device's GPU (by bus id); a rank without one stands
// for GPU gpuOverride[localIndex], or, in a graph read from a file, GPU localIndex mod the file's GPUs
// (tests and users running host-memory ranks for a GPU machine). A live graph gives CPU ranks no GPU.
// The NUMA node is the GPU's, else the one holding most of the rank's CPUs.
Status placeRank(const SystemGraph& host, const PlacementInputs& in, RankPlacement* out);

// A fingerprint of a host graph: ranks of one host must all use the same (same LOOM_TOPO_FILE, same
// hardware), or they would plan their host differently.
uint64_t graphFingerprint(const SystemGraph& graph);

// Step 2's message: one rank's part of its host's plan. A host has two sets of rings over its ranks:
// the topology search's (used as they are when the job has one host, so that they are loom-topo's), and
// rail rings for jobs of several hosts: one per channel, at least one per NIC (and, on hosts without
// GPUs, one per rank, spreading the crossings between hosts over the ranks), channel c being search ring
// c mod searchRings turned to start at the rank closest to the channel's NIC, where it enters and
// leaves the host.
struct HostChannelRecord {
  int32_t searchRings = 0;                      // the topology search's rings (1..kMaxJobChannels)
  int16_t position[kMaxJobChannels] = {};       // this rank's place in search ring c
  int32_t channels = 0;                         // rail rings (searchRings..kMaxJobChannels)
  int16_t railPosition[kMaxJobChannels] = {};   // this rank's place in rail ring c
  int16_t channelNic[kMaxJobChannels] = {};     // the host's NIC of rail ring c, -1 when it has none
  int32_t nic = -1;                      // the NIC this rank uses (closest to its GPU or NUMA node), -1 none
  int32_t nics = 0;                      // NICs of the host
  float ringGbs = 0;                     // bus bandwidth of the host's rings (topology search), 0 unknown
  float nicGbs = 0;                      // the slowest NIC the host's channels use, 0 unknown
  int32_t worstPath = 0;                 // the worst path class (PathType) between neighbours of its rings
  int32_t nicPath = -1;                  // the path class (PathType) from its GPU to `nic`; -1: no GPU or no path
  char nicName[32] = {};                 // the name of `nic`
  char nicBusId[16] = {};                // its PCI address ("" when it has none)
};

// Between steps 1 and 2: the ranks of each host must have placed themselves in the same graph, or they
// would plan their host differently (an error naming two of them otherwise).
Status checkHostsAgree(std::span<const RankPlacement> placements);

// Step 2: the plan of one host for its ranks `hostRanks` (job ranks, ascending) placed as `placements`
// (by job rank); the record of each of them, in the same order.
Status chooseHostChannels(const SystemGraph& host, std::span<const int> hostRanks,
                          std::span<const RankPlacement> placements, std::vector<HostChannelRecord>* records);

// Step 3's result: what a communicator uses.
struct JobTopology {
  int nranks = 0;
  std::vector<int> hostOf;                    // rank -> host (numbered by first rank)
  std::vector<std::vector<int>> hostRanks;    // host -> its ranks, ascending
  std::vector<std::vector<int>> rings;        // channel -> every rank once, in ring order
  std::vector<std::vector<int>> channelNics;  // channel -> host -> NIC index in that host's graph (-1 none);
                                              // empty for a job of one host
  std::vector<int> nicOf;                     // rank -> the NIC it uses (-1 none)
  std::vector<std::string> nicNameOf;         // rank -> that NIC's name ("" none)
  std::vector<std::string> nicBusIdOf;        // rank -> that NIC's PCI address ("" none or unknown)
  std::vector<int> nicPathOf;                 // rank -> the path class (PathType) from its GPU to that NIC
                                              // (-1: no GPU, or no path); what GPUDirect RDMA is decided on
  std::vector<RankPlacement> placements;      // rank -> step 1's message
  int ranksPerHost = 0;                       // ranks of every host, when hosts hold equal contiguous blocks; else 0
  int nicsPerHost = 0;                        // the fewest NICs of any host
  double ringGbs = 0;                         // the slowest host's ring bus bandwidth (0 unknown)
  double nicGbs = 0;                          // the slowest NIC the channels use (0 unknown)
  PathType worstPath = PathType::Loc;         // the worst path class between ring neighbours of any host
  double copyGbs = 0;                         // the slowest rank's measured host-memory copy rate (0 none)

  int hosts() const { return static_cast<int>(hostRanks.size()); }
};

// Step 3: from every rank's placement and host record (by rank). loomInvalidArgument when the ranks of
// a host disagree about it (a LOOM_TOPO_FILE set differently on two of them, say), naming them.
Status assembleJob(std::span<const RankPlacement> placements, std::span<const HostChannelRecord> records,
                   JobTopology* out);

// The three steps for a modelled job (no exchange: every host is described by `host`): host h holds
// hostSlots[h].size() ranks, its i-th rank standing for the one of local index hostSlots[h][i] on a
// full host (so for that index's GPU, mod the host's GPUs). The cost model (src/model) times any group
// of a job's ranks this way.
Status modelJob(const SystemGraph& host, const std::vector<std::vector<int>>& hostSlots, double copyGbs,
                JobTopology* out);
// `nranks` ranks in hosts of `ranksPerHost` (0: one host; the last may be partial), standing for the
// host's GPUs in order (loom-info; tests).
LOOM_TOOLS_API Status modelJob(const SystemGraph& host, int nranks, int ranksPerHost, double copyGbs, JobTopology* out);

}  // namespace loom
