#include "device/p2p_fifos.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "base/log.h"
#include "device/copy_rate.h"
#include "device/ipc_mappings.h"
#include "device/memory_kind.h"
#include "device/private_stream.h"
#include "kernels/cuda/plan_launch.h"

namespace loom::device {
namespace {

// A setup step on one rank (rounds 2 and 3, the network lanes' start): whether it worked, and why not.
struct Verdict {
  uint32_t ok = 0;
  char why[204] = {0};
};

// Round 2: the rank's block.
struct BlockOffer {
  Verdict verdict;
  uint64_t address = 0;         // the block in its own process (used by ranks of the same process)
  cudaIpcMemHandle_t handle{};  // the block, for other processes (set only when one needs it)
  float copyGbs = 0;            // its GPU's copy rate, where other ranks share that GPU (0: not measured)
};

template <size_t N>
void setWhy(char (&why)[N], const std::string& text) {
  std::snprintf(why, N, "%s", text.c_str());
}

ProcessIdentity processOf(const P2pFacts& f) { return ProcessIdentity{f.hostHash, f.pid, f.nonce}; }

// The first rank's reason among `all` that did not succeed, or "".
template <class T, class Ok>
std::string firstRefusal(const std::vector<T>& all, Ok verdictOf) {
  for (const T& one : all)
    if (!verdictOf(one).ok) return verdictOf(one).why;
  return "";
}

// A kernel on `device` that writes into `peerDevice`'s memory needs peer access to it: "" or why not.
std::string enablePeerAccess(int device, int peerDevice, int rank, const std::string& busId, int peer,
                             const std::string& peerBusId) {
  if (peerDevice < 0 || peerDevice == device) return "";
  int can = 0;
  if (cudaDeviceCanAccessPeer(&can, device, peerDevice) != cudaSuccess || !can) {
    cudaGetLastError();
    return fmt::format("GPU {} (rank {}) cannot access GPU {} (rank {}) as a peer", busId, rank, peerBusId, peer);
  }
  const cudaError_t err = cudaDeviceEnablePeerAccess(peerDevice, 0);
  cudaGetLastError();  // clears cudaErrorPeerAccessAlreadyEnabled, which cudaGetLastError would report later
  if (err != cudaSuccess && err != cudaErrorPeerAccessAlreadyEnabled)
    return fmt::format("rank {}: cudaDeviceEnablePeerAccess({}): {}", rank, peerDevice, cudaGetErrorString(err));
  return "";
}

const char* peerReachText(PeerReach reach, bool setting) {
  switch (reach) {
    case PeerReach::AnyBuffer: return "possible";
    case PeerReach::Windows: return "possible on buffers in windows (loomCommWindowRegister)";
    case PeerReach::None: break;
  }
  return setting ? "not possible (not every rank runs on this GPU with LOOM_DEVICE_PEER_MEMORY on)"
                 : "off (LOOM_DEVICE_PEER_MEMORY=0)";
}

}  // namespace

Status agreeOnSetupStep(PeerExchange& exchange, const std::string& failure, std::string* why) {
  Verdict mine;
  mine.ok = failure.empty();
  setWhy(mine.why, failure);
  std::vector<Verdict> all(exchange.nranks());
  LOOM_TRY(exchange.allGather(&mine, all.data(), sizeof mine));
  *why = firstRefusal(all, [](const Verdict& v) -> const Verdict& { return v; });
  return Status::Ok();
}

P2pFifos::~P2pFifos() {
  if (device_ < 0) return;
  DeviceScope scope(device_);
  for (size_t r = 0; r < blocks_.size(); ++r)
    if (ipcOpened_[r] && blocks_[r]) closeIpcMapping(blocks_[r]);
  if (own_ && !keepBlock_) cudaFree(own_);
}

// One FIFO's region: tail and head on their own lines, the size words, the direct-mode posts, the slots,
// the low-latency slots (zeroed with the rest: no flag is 0).
size_t P2pFifos::regionBytes() const {
  const DeviceFifoLayout& l = options_.layout;
  return 2 * cuda::kFifoLine + cuda::alignToFifoLine(l.nslots * sizeof(uint64_t)) +
         cuda::alignToFifoLine(l.nslots * sizeof(cuda::DeviceDirectPost)) + l.nslots * l.slotBytes +
         l.nslots * cuda::kLowLatencySlotBytes;
}

size_t P2pFifos::boardsOffset(size_t peers) const {
  return cuda::alignToFifoLine(peers * options_.nchannels * regionBytes());
}

size_t P2pFifos::regionOffset(int owner, int sender, uint32_t channel) const {
  size_t slot = 0;  // the senders before this one that share owner's host (which is this rank's)
  for (int r = 0; r < sender; ++r) slot += r != owner && !netPeers_[r] ? 1 : 0;
  return (slot * options_.nchannels + channel) * regionBytes();
}

bool P2pFifos::hasNetPeers() const { return std::find(netPeers_.begin(), netPeers_.end(), true) != netPeers_.end(); }

void P2pFifos::adoptNetFifos(const NetLaneTables& tables) {
  for (size_t i = 0; i < sends_.size() && i < tables.sends.size(); ++i)
    if (netPeers_[i / options_.nchannels]) {
      sends_[i] = tables.sends[i];
      recvs_[i] = tables.recvs[i];
    }
}

cuda::DeviceFifo P2pFifos::fifoIn(char* ownerBlock, int owner, int sender, uint32_t channel, bool withPosts) const {
  char* region = ownerBlock + regionOffset(owner, sender, channel);
  const size_t postsAt = 2 * cuda::kFifoLine + cuda::alignToFifoLine(options_.layout.nslots * sizeof(uint64_t));
  cuda::DeviceFifo f;
  f.tail = reinterpret_cast<uint64_t*>(region);
  f.head = reinterpret_cast<uint64_t*>(region + cuda::kFifoLine);
  f.sizes = reinterpret_cast<uint64_t*>(region + 2 * cuda::kFifoLine);
  if (withPosts) f.posts = reinterpret_cast<cuda::DeviceDirectPost*>(region + postsAt);
  f.slots = region + postsAt + cuda::alignToFifoLine(options_.layout.nslots * sizeof(cuda::DeviceDirectPost));
  f.slotBytes = options_.layout.slotBytes;
  f.nslots = options_.layout.nslots;
  f.lowLatencySlots = f.slots + options_.layout.nslots * options_.layout.slotBytes;  // GPU memory: 8-byte stores land whole
  return f;
}

Status P2pFifos::allocate() {
  size_t sameHostPeers = 0;
  for (int r = 0; r < nranks_; ++r) sameHostPeers += r != rank_ && !netPeers_[r] ? 1 : 0;
  // The regions, then a board per channel for peer-memory plans (zeroed with the rest: no Meet yet).
  ownBytes_ = boardsOffset(sameHostPeers) + options_.nchannels * sizeof(cuda::DevicePeerBoard);
  void* block = nullptr;
  LOOM_CUDA_TRY(cudaMalloc(&block, ownBytes_));
  own_ = static_cast<char*>(block);
  // Counters start at zero.
  return runOnPrivateStream([&](cudaStream_t s) { return cudaMemsetAsync(own_, 0, ownBytes_, s); }, "cudaMemsetAsync");
}

Status P2pFifos::create(PeerExchange& exchange, std::span<const ProcessIdentity> processes, int device,
                        const P2pFifoOptions& options, std::unique_ptr<P2pFifos>* out, std::string* why,
                        bool* required) {
  out->reset();
  why->clear();
  std::unique_ptr<P2pFifos> f(new P2pFifos());
  f->rank_ = exchange.rank();
  f->nranks_ = exchange.nranks();
  f->device_ = device;
  f->options_ = options;
  f->options_.layout.slotBytes = cuda::alignToFifoLine(options.layout.slotBytes);
  DeviceScope scope(device);
  const ProcessIdentity& self = processes[f->rank_];

  // Round 1: facts (p2p_policy.h), and the verdict they give, before anything is allocated.
  P2pFacts mine;
  mine.hostHash = self.hostHash;
  mine.nonce = self.nonce;
  mine.pid = self.pid;
  mine.device = device;
  mine.policy = static_cast<int32_t>(options.policy);
  Status local = cudaStatus(scope.error(), "cudaSetDevice");
  if (local.ok()) local = cudaStatus(cudaDeviceGetPCIBusId(mine.busId, sizeof mine.busId, device), "cudaDeviceGetPCIBusId");
  if (local.ok()) local = cudaStatus(cuda::planKernelCapacity(device, &mine.residentBlocks), "plan kernel occupancy");
  mine.ok = local.ok();
  if (!local.ok()) setWhy(mine.why, fmt::format("rank {}: {}", f->rank_, local.message()));
  mine.nchannels = f->options_.nchannels;
  mine.nslots = f->options_.layout.nslots;
  mine.slotBytes = f->options_.layout.slotBytes;
  mine.netLanes = options.netLanes ? 1 : 0;
  mine.peerMemory = options.peerMemory ? 1 : 0;
  std::vector<P2pFacts> facts(f->nranks_);
  LOOM_TRY(exchange.allGather(&mine, facts.data(), sizeof mine).withContext("p2p transport setup"));
  std::vector<P2pPolicy> policies;
  for (const P2pFacts& o : facts) policies.push_back(static_cast<P2pPolicy>(o.policy));
  *required = p2pRequired(policies);
  *why = p2pSetupRefusal(facts);
  if (!why->empty()) return Status::Ok();  // every rank saw the same facts and stops here, nothing allocated
  for (const P2pFacts& o : facts) f->netPeers_.push_back(o.hostHash != self.hostHash);
  {
    // The same on every rank (every rank has the same facts): from the host with the most ranks.
    std::map<uint64_t, size_t> ranksOnHost;
    size_t mostOnAHost = 1;
    for (const P2pFacts& o : facts) mostOnAHost = std::max(mostOnAHost, ++ranksOnHost[o.hostHash]);
    f->options_.layout = layoutForJob(f->options_.layout, ranksOnHost.size(), mostOnAHost, f->options_.nchannels);
    f->options_.layout.slotBytes = cuda::alignToFifoLine(f->options_.layout.slotBytes);
  }
  f->residentShare_ = p2pResidentShare(facts);
  f->laneBudget_ = std::max(1u, f->residentShare_ / 2);

  // Round 2: every rank's block; a CUDA IPC handle only when some peer on this host lives in another
  // process (peers on other hosts are reached through network lanes).
  bool otherProcesses = false;
  for (int r = 0; r < f->nranks_; ++r)
    otherProcesses = otherProcesses || (!f->netPeers_[r] && !processOf(facts[r]).sameProcess(self));
  BlockOffer block;
  // Ranks that share their GPU with others price their exchanges by its copy rate (device tuner).
  for (const P2pFacts& gpu : facts) f->ranksPerGpu_ = std::max(f->ranksPerGpu_, static_cast<int>(p2pRanksOnGpu(facts, gpu)));
  if (p2pRanksOnGpu(facts, mine) > 1) block.copyGbs = static_cast<float>(gpuCopyRateSettingOrMeasured(device));
  local = f->allocate();
  if (local.ok() && otherProcesses) local = cudaStatus(cudaIpcGetMemHandle(&block.handle, f->own_), "cudaIpcGetMemHandle");
  block.verdict.ok = local.ok();
  if (!local.ok()) setWhy(block.verdict.why, fmt::format("rank {}: {}", f->rank_, local.message()));
  block.address = reinterpret_cast<uintptr_t>(f->own_);
  std::vector<BlockOffer> blocks(f->nranks_);
  *out = std::move(f);  // from here on, what was allocated lives as long as the communicator
  P2pFifos& fifos = **out;
  LOOM_TRY(exchange.allGather(&block, blocks.data(), sizeof block).withContext("p2p transport setup"));
  *why = firstRefusal(blocks, [](const BlockOffer& b) -> const Verdict& { return b.verdict; });
  if (!why->empty()) return Status::Ok();
  for (const BlockOffer& b : blocks)
    if (b.copyGbs > 0 && (fifos.gpuCopyGbs_ == 0 || b.copyGbs < fifos.gpuCopyGbs_)) fifos.gpuCopyGbs_ = b.copyGbs;

  // Round 3: whether every rank could map every peer's block.
  fifos.blocks_.assign(fifos.nranks_, nullptr);
  fifos.ipcOpened_.assign(fifos.nranks_, false);
  fifos.sameProcess_.assign(fifos.nranks_, false);
  fifos.blocks_[fifos.rank_] = fifos.own_;
  std::string mapFailure;
  for (int r = 0; r < fifos.nranks_ && mapFailure.empty(); ++r) {
    if (r == fifos.rank_ || fifos.netPeers_[r]) continue;
    const P2pFacts& peer = facts[r];
    const bool sameProcess = processOf(peer).sameProcess(self);
    int peerDevice = sameProcess ? peer.device : -1;
    if (!sameProcess && cudaDeviceGetByPCIBusId(&peerDevice, peer.busId) != cudaSuccess) {
      peerDevice = -1;  // a GPU this process does not see: CUDA IPC maps it without peer access
      cudaGetLastError();
    }
    mapFailure = enablePeerAccess(device, peerDevice, fifos.rank_, mine.bus(), r, peer.bus());
    if (!mapFailure.empty()) break;
    if (sameProcess) {
      fifos.blocks_[r] = reinterpret_cast<char*>(static_cast<uintptr_t>(blocks[r].address));
      fifos.sameProcess_[r] = true;
      fifos.directPeersOnOtherGpus_ = fifos.directPeersOnOtherGpus_ || peer.device != device;
      fifos.sharesGpuInThisProcess_ = fifos.sharesGpuInThisProcess_ || peer.device == device;
      continue;
    }
    Status opened = openIpcMapping(blocks[r].handle, &fifos.blocks_[r]);
    if (!opened.ok()) {
      mapFailure = fmt::format("rank {} cannot map rank {}'s FIFOs: {}", fifos.rank_, r, opened.message());
      break;
    }
    fifos.ipcOpened_[r] = true;
    fifos.ipcPeers_.push_back(PeerProcess{r, peer.pid});
  }
  LOOM_TRY(agreeOnSetupStep(exchange, mapFailure, why).withContext("p2p transport setup"));
  if (!why->empty()) return Status::Ok();

  const size_t n = static_cast<size_t>(fifos.nranks_) * fifos.options_.nchannels;
  fifos.sends_.assign(n, cuda::DeviceFifo{});
  fifos.recvs_.assign(n, cuda::DeviceFifo{});
  for (int peer = 0; peer < fifos.nranks_; ++peer) {
    if (peer == fifos.rank_ || fifos.netPeers_[peer]) continue;
    for (uint32_t c = 0; c < fifos.options_.nchannels; ++c) {
      const size_t i = static_cast<size_t>(peer) * fifos.options_.nchannels + c;
      fifos.sends_[i] = fifos.fifoIn(fifos.blocks_[peer], peer, fifos.rank_, c, fifos.sameProcess_[peer]);
      fifos.recvs_[i] = fifos.fifoIn(fifos.own_, fifos.rank_, peer, c, fifos.sameProcess_[peer]);
      // Both ends kernels of this process on this GPU: the counters need only the GPU's coherence (a
      // peer in another process, even on this GPU, keeps system scope: its mapping is CUDA IPC's).
      if (fifos.sameProcess_[peer] && facts[peer].device == device)
        fifos.sends_[i].scope = fifos.recvs_[i].scope = cuda::FifoScope::Gpu;
    }
  }
  // Peer-memory plans: every rank on this GPU with the setting on (the same verdict everywhere: every
  // rank has the same facts). Rank threads of this process address each other's buffers whatever
  // their allocator; ranks in other processes only inside windows (peer_windows.h).
  bool oneGpu = !fifos.hasNetPeers();
  bool oneProcess = true;
  for (int r = 0; r < fifos.nranks_ && oneGpu; ++r) {
    oneGpu = facts[r].peerMemory != 0 && std::strcmp(facts[r].busId, mine.busId) == 0;
    oneProcess = oneProcess && (r == fifos.rank_ || fifos.sameProcess_[r]);
  }
  if (oneGpu) {
    fifos.peerReach_ = oneProcess ? PeerReach::AnyBuffer : PeerReach::Windows;
    const size_t peers = static_cast<size_t>(fifos.nranks_) - 1;
    for (int r = 0; r < fifos.nranks_; ++r)
      fifos.boards_.push_back(reinterpret_cast<cuda::DevicePeerBoard*>(fifos.blocks_[r] + fifos.boardsOffset(peers)));
  }
  LOOM_INFO(Init,
            "rank {}: p2p FIFOs on GPU {} ({} KiB, {} channel(s) x {} slots of {} KiB per peer; launches of at most {} "
            "blocks; CUDA IPC {}; peer-memory plans {})",
            fifos.rank_, mine.bus(), fifos.ownBytes_ >> 10, fifos.options_.nchannels, fifos.options_.layout.nslots,
            fifos.options_.layout.slotBytes >> 10, fifos.laneBudget_, otherProcesses ? "exported" : "not needed",
            peerReachText(fifos.peerReach_, fifos.options_.peerMemory));
  return Status::Ok();
}

}  // namespace loom::device
