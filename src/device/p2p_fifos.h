// The p2p transport (docs/DESIGN.md): FIFOs in GPU memory that the ranks of one host reach directly, for
// the plan kernel (kernels/cuda/plan_kernel.cu). Peers on other hosts get no FIFO here: the tables
// take the network lanes' (net_lane_fifos.h, adoptNetFifos). Every rank allocates one block of device memory
// holding the FIFOs its peers send into and maps every peer's block: same process (ranks as threads)
// by address, other processes with CUDA IPC, over NVLink or PCIe peer access, or on the same GPU.
// Several ranks may share one GPU.
//
// A FIFO from rank s to rank r on channel c lives entirely in r's block: its slots, the message sizes,
// `tail` (written by s) and `head` (written by r, polled by s across the link). Keeping `head` with
// the receiver costs the sender a remote poll, but it means a peer only ever touches a rank's block
// while that rank's kernel still has to consume something from it, so a rank may free its block once
// its own kernels are done (kernels/cuda/device_plan_layout.h keeps the counters' protocol).
//
// Direct mode (single copy, DeviceDirectPost): every FIFO also has posts in the receiver's block, and
// between ranks of one process (one address space) both ends see them, so that a receiver may post
// its destination and the sender write there instead of into a slot. Between processes the posts
// stay unused: a destination would be an address in another process (that needs its buffers mapped
// with CUDA IPC, which NCCL too does only for registered buffers).
//
// Setup is collective and decides before it allocates: a first exchange of facts (host, process,
// GPU, policy, FIFO layout) lets every rank reach the same verdict on whether plan kernels can run at
// all; only then does each rank allocate its block (exported with CUDA IPC only when some peer is in
// another process) and map its peers'. Memory allocated for a setup that fails later is freed with
// the communicator, never inside the operation that set it up (cudaFree synchronizes the device, and
// a peer's kernel may already wait).
//
// CUDA builds only; no CUDA header is needed to include this file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/exchange.h"
#include "base/status.h"
#include "device/device_layer.h"
#include "device/fifo_layout.h"
#include "device/p2p_policy.h"
#include "device/peer_process_watch.h"
#include "kernels/cuda/device_plan_layout.h"

namespace loom::device {

struct P2pFifoOptions {
  uint32_t nchannels = 1;
  DeviceFifoLayout layout;  // as asked: fitted to the job at setup (fifo_layout.h)
  P2pPolicy policy = P2pPolicy::Auto;
  bool netLanes = false;  // peers on other hosts are reached through network lanes (net_lane_fifos.h)
  bool peerMemory = true;  // LOOM_DEVICE_PEER_MEMORY: boards for peer-memory plans where every rank may use them
};

// One step of a collective setup that every rank must pass: each rank's `failure` ("" when its step
// worked); *why becomes the first failing rank's, "" when all worked. Collective over `exchange`.
Status agreeOnSetupStep(PeerExchange& exchange, const std::string& failure, std::string* why);

// Whose buffers a rank's plan kernel may read and write directly (peer-memory plans).
enum class PeerReach {
  None,       // nobody's: messages through FIFOs only
  AnyBuffer,  // every rank's, whatever its allocator: rank threads of this process on this GPU
  Windows,    // every rank's inside windows (peer_windows.h): rank processes (or threads and processes) on this GPU
};

class P2pFifos {
 public:
  ~P2pFifos();  // frees the block (unless kept after a failure) and closes IPC mappings
  P2pFifos(const P2pFifos&) = delete;
  P2pFifos& operator=(const P2pFifos&) = delete;

  // Collective over `exchange` (every rank calls it, with the GPU its buffers are on). *out is set
  // whenever this rank allocated something, to be kept until the communicator goes; *why is "" when
  // the FIFOs are usable, else the reason, the same on every rank; *required says whether some rank
  // asked for plan kernels (LOOM_DEVICE_PLANS=require). An error only when an exchange failed.
  static Status create(PeerExchange& exchange, std::span<const ProcessIdentity> processes, int device,
                       const P2pFifoOptions& options, std::unique_ptr<P2pFifos>* out, std::string* why,
                       bool* required);

  // This rank's FIFO tables as the plan encoder wants them: [peer * nchannels + channel], the ones it
  // fills (in the peers' blocks) and the ones it drains (in its own); empty for itself.
  std::span<const cuda::DeviceFifo> sends() const { return sends_; }
  std::span<const cuda::DeviceFifo> recvs() const { return recvs_; }
  // Ranks on other hosts (the tables above have nothing for them until adoptNetFifos), by rank.
  const std::vector<bool>& netPeers() const { return netPeers_; }
  // The ranks of other processes whose blocks this rank mapped through CUDA IPC, with their pids.
  const std::vector<PeerProcess>& ipcPeers() const { return ipcPeers_; }
  bool hasNetPeers() const;
  // The network lanes' FIFOs join the tables, for the peers on other hosts.
  void adoptNetFifos(const NetLaneTables& tables);
  uint32_t nchannels() const { return options_.nchannels; }
  uint32_t nslots() const { return options_.layout.nslots; }
  size_t slotBytes() const { return options_.layout.slotBytes; }
  int device() const { return device_; }
  // Whether a peer that may write into this rank's buffers directly (a rank of this process) runs on
  // another GPU: it then reaches only memory that peer access covers (cudaMalloc, not stream-ordered
  // pools or cuMem allocations).
  bool directPeersOnOtherGpus() const { return directPeersOnOtherGpus_; }
  // Whether another rank of this process runs on this GPU: then the legacy default stream, one queue
  // for them all, would serialize kernels that wait for each other.
  bool sharesGpuInThisProcess() const { return sharesGpuInThisProcess_; }
  // Blocks one rank's launch may use, the same on every rank: the fewest, over the GPUs of the job, of
  // the plan kernel's resident blocks shared by the ranks on that GPU, halved (the application's own
  // kernels need SMs too, and every block of every rank must be resident while they wait on each other).
  uint32_t laneBudget() const { return laneBudget_; }
  // The most blocks one rank's launch can have resident at all (its unhalved share of the GPU): a
  // launch beyond it is refused.
  uint32_t residentShare() const { return residentShare_; }
  // The copy rate of the slowest GPU that ranks share (copy_rate.h), the same on every rank; 0 when no
  // ranks share a GPU or none could measure it.
  double gpuCopyGbs() const { return gpuCopyGbs_; }
  // The most ranks of the communicator on one GPU (same host, same bus id).
  int ranksPerGpu() const { return ranksPerGpu_; }
  // Peer-memory plans (algorithms/peer_memory.cc): every rank runs on this GPU and options.peerMemory
  // held on every rank; the same on every rank. Rank threads of this process address each other's
  // buffers whatever their allocator (AnyBuffer); ranks in other processes reach each other's buffers
  // inside windows only (Windows, peer_windows.h). Then boards() gives, by rank, its boards (one per
  // channel, at the end of its block), coherent at boardScope(); empty otherwise.
  PeerReach peerReach() const { return peerReach_; }
  cuda::FifoScope boardScope() const {
    return peerReach_ == PeerReach::AnyBuffer ? cuda::FifoScope::Gpu : cuda::FifoScope::System;
  }
  std::span<cuda::DevicePeerBoard* const> boards() const { return boards_; }
  // After a failure peers may still write into this rank's block: it is then kept (not freed) until
  // the process ends, so that a late write cannot land in memory the application got back.
  void keepBlockAfterFailure() { keepBlock_ = true; }

 private:
  P2pFifos() = default;
  size_t regionBytes() const;
  // Where a block's boards start: after the regions of a block with `peers` peers on its host.
  size_t boardsOffset(size_t peers) const;
  // Where sender's FIFO lies in owner's block (owner on this rank's host): a block holds one region per
  // (peer on its host, channel).
  size_t regionOffset(int owner, int sender, uint32_t channel) const;
  cuda::DeviceFifo fifoIn(char* ownerBlock, int owner, int sender, uint32_t channel, bool withPosts) const;
  Status allocate();

  int rank_ = 0;
  int nranks_ = 1;
  int device_ = -1;
  P2pFifoOptions options_;
  char* own_ = nullptr;
  size_t ownBytes_ = 0;
  std::vector<bool> netPeers_;     // by rank: on another host than this rank
  std::vector<char*> blocks_;      // by rank: where this rank sees each rank's block
  std::vector<bool> ipcOpened_;    // by rank: mapped through the process's IPC mappings (released when done)
  std::vector<PeerProcess> ipcPeers_;  // those ranks and their processes
  std::vector<bool> sameProcess_;  // by rank: shares this process's address space (direct mode)
  bool directPeersOnOtherGpus_ = false;
  bool sharesGpuInThisProcess_ = false;
  uint32_t laneBudget_ = 1;
  uint32_t residentShare_ = 1;
  double gpuCopyGbs_ = 0;
  int ranksPerGpu_ = 1;
  std::vector<cuda::DeviceFifo> sends_, recvs_;
  PeerReach peerReach_ = PeerReach::None;
  std::vector<cuda::DevicePeerBoard*> boards_;  // by rank (peerReach_ != None)
  bool keepBlock_ = false;
};

}  // namespace loom::device
