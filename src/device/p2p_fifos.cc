#include "transport/p2p_fifos.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>

#include "base/log.h"
#include "kernels/cuda/memory_kind.h"
#include "kernels/cuda/plan_launch.h"

namespace loom {

// What every rank tells the others, twice: once after allocating and exporting its block, and once
// (only `ok` and `why` matter) after trying to map every peer's.
struct P2pOffer {
  uint64_t hostHash = 0;
  int32_t pid = 0;
  int32_t device = -1;
  int32_t policy = static_cast<int32_t>(P2pPolicy::Auto);
  uint32_t ok = 0;  // the block is allocated and exported (first round) or every peer mapped (second)
  uint32_t residentBlocks = 0;  // plan-kernel blocks its GPU holds at once
  uint32_t nchannels = 0, nslots = 0;  // the FIFO layout: every rank must use the same
  uint64_t slotBytes = 0;
  uint64_t address = 0;         // the block in its own process (used by ranks of the same process)
  char busId[32] = {0};         // the GPU, as every process names it (ordinals depend on CUDA_VISIBLE_DEVICES)
  cudaIpcMemHandle_t handle{};  // the block, for other processes
  char why[160] = {0};          // when !ok
};

namespace {

constexpr size_t kLine = 128;  // a counter's own line (DeviceFifoCounter)

size_t alignLine(size_t n) { return (n + kLine - 1) / kLine * kLine; }

void setWhy(P2pOffer* offer, const std::string& text) {
  std::snprintf(offer->why, sizeof offer->why, "%s", text.c_str());
}

// P2pFifos::laneBudget, from every rank's offer alike.
uint32_t agreedLaneBudget(const std::vector<P2pOffer>& offers) {
  uint32_t budget = UINT32_MAX;
  for (const P2pOffer& gpu : offers) {
    uint32_t sharing = 0;
    for (const P2pOffer& o : offers)
      sharing += o.hostHash == gpu.hostHash && std::strncmp(o.busId, gpu.busId, sizeof o.busId) == 0 ? 1 : 0;
    budget = std::min(budget, gpu.residentBlocks / std::max(1u, sharing) / 2);
  }
  return std::max(1u, budget);
}

}  // namespace

P2pFifos::~P2pFifos() {
  if (device_ < 0) return;
  cuda::DeviceScope scope(device_);
  for (size_t r = 0; r < blocks_.size(); ++r)
    if (ipcOpened_[r] && blocks_[r]) cudaIpcCloseMemHandle(blocks_[r]);
  if (own_ && !keepBlock_) cudaFree(own_);
}

// One FIFO's region: tail and head on their own lines, the size words, the direct-mode posts, the slots.
size_t P2pFifos::regionBytes() const {
  return 2 * kLine + alignLine(options_.nslots * sizeof(uint64_t)) +
         alignLine(options_.nslots * sizeof(cuda::DeviceDirectPost)) + options_.nslots * options_.slotBytes;
}

size_t P2pFifos::regionOffset(int owner, int sender, uint32_t channel) const {
  const size_t slot = static_cast<size_t>(sender < owner ? sender : sender - 1);
  return (slot * options_.nchannels + channel) * regionBytes();
}

cuda::DeviceFifo P2pFifos::fifoIn(char* ownerBlock, int owner, int sender, uint32_t channel, bool withPosts) const {
  char* region = ownerBlock + regionOffset(owner, sender, channel);
  const size_t postsAt = 2 * kLine + alignLine(options_.nslots * sizeof(uint64_t));
  cuda::DeviceFifo f;
  f.tail = reinterpret_cast<uint64_t*>(region);
  f.head = reinterpret_cast<uint64_t*>(region + kLine);
  f.sizes = reinterpret_cast<uint64_t*>(region + 2 * kLine);
  if (withPosts) f.posts = reinterpret_cast<cuda::DeviceDirectPost*>(region + postsAt);
  f.slots = region + postsAt + alignLine(options_.nslots * sizeof(cuda::DeviceDirectPost));
  f.slotBytes = options_.slotBytes;
  f.nslots = options_.nslots;
  return f;
}

Status P2pFifos::allocate() {
  ownBytes_ = std::max<size_t>(1, static_cast<size_t>(nranks_ - 1) * options_.nchannels * regionBytes());
  void* block = nullptr;
  LOOM_CUDA_TRY(cudaMalloc(&block, ownBytes_));
  own_ = static_cast<char*>(block);
  // Counters start at zero. A private stream: a legacy-stream memset would wait for kernels that other
  // ranks of this process may already have running on the device.
  cudaStream_t stream = nullptr;
  LOOM_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaError_t err = cudaMemsetAsync(own_, 0, ownBytes_, stream);
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  cudaStreamDestroy(stream);
  LOOM_CUDA_TRY(err);
  return Status::Ok();
}

std::string P2pFifos::mapPeers(const std::vector<P2pOffer>& offers) {
  const P2pOffer& mine = offers[rank_];
  blocks_.assign(nranks_, nullptr);
  ipcOpened_.assign(nranks_, false);
  sameProcess_.assign(nranks_, false);
  blocks_[rank_] = own_;
  for (int r = 0; r < nranks_; ++r) {
    if (r == rank_) continue;
    const P2pOffer& peer = offers[r];
    const bool samePid = peer.pid == mine.pid && peer.hostHash == mine.hostHash;
    if (peer.device != device_ || !samePid) {
      // A kernel on this GPU writes into the peer's GPU memory: it needs peer access to it.
      int peerDevice = -1;
      if (samePid) {
        peerDevice = peer.device;
      } else if (cudaDeviceGetByPCIBusId(&peerDevice, peer.busId) != cudaSuccess) {
        peerDevice = -1;
        cudaGetLastError();
      }
      if (peerDevice >= 0 && peerDevice != device_) {
        int can = 0;
        if (cudaDeviceCanAccessPeer(&can, device_, peerDevice) != cudaSuccess || !can) {
          cudaGetLastError();
          return fmt::format("GPU {} (rank {}) cannot access GPU {} (rank {}) as a peer", mine.busId, rank_,
                             peer.busId, r);
        }
        if (samePid) {
          const cudaError_t err = cudaDeviceEnablePeerAccess(peerDevice, 0);
          if (err != cudaSuccess && err != cudaErrorPeerAccessAlreadyEnabled) {
            cudaGetLastError();
            return fmt::format("rank {}: cudaDeviceEnablePeerAccess({}): {}", rank_, peerDevice, cudaGetErrorString(err));
          }
          cudaGetLastError();  // clear the AlreadyEnabled error, which cudaGetLastError would report later
        }
      }
    }
    if (samePid) {
      blocks_[r] = reinterpret_cast<char*>(static_cast<uintptr_t>(peer.address));
      sameProcess_[r] = true;
      directPeersOnOtherGpus_ = directPeersOnOtherGpus_ || peer.device != device_;
      continue;
    }
    void* mapped = nullptr;
    const cudaError_t err = cudaIpcOpenMemHandle(&mapped, peer.handle, cudaIpcMemLazyEnablePeerAccess);
    if (err != cudaSuccess) {
      cudaGetLastError();
      return fmt::format("rank {} cannot map rank {}'s FIFOs: cudaIpcOpenMemHandle: {}", rank_, r,
                         cudaGetErrorString(err));
    }
    blocks_[r] = static_cast<char*>(mapped);
    ipcOpened_[r] = true;
  }
  return "";
}

Status P2pFifos::create(PeerExchange& exchange, const std::vector<PeerLocation>& peers, int device,
                        const P2pFifoOptions& options, std::unique_ptr<P2pFifos>* out, std::string* why) {
  out->reset();
  why->clear();
  std::unique_ptr<P2pFifos> f(new P2pFifos());
  f->rank_ = exchange.rank();
  f->nranks_ = exchange.nranks();
  f->device_ = device;
  f->options_ = options;
  f->options_.slotBytes = alignLine(options.slotBytes);
  cuda::DeviceScope scope(device);

  P2pOffer mine;
  mine.hostHash = peers[f->rank_].hostHash;
  mine.pid = peers[f->rank_].pid;
  mine.device = device;
  mine.policy = static_cast<int32_t>(options.policy);
  Status local = cuda::cudaStatus(scope.error(), "cudaSetDevice");
  if (local.ok()) local = cuda::cudaStatus(cudaDeviceGetPCIBusId(mine.busId, sizeof mine.busId, device), "cudaDeviceGetPCIBusId");
  if (local.ok()) local = cuda::cudaStatus(cuda::planKernelCapacity(device, &mine.residentBlocks), "plan kernel occupancy");
  mine.nchannels = f->options_.nchannels;
  mine.nslots = f->options_.nslots;
  mine.slotBytes = f->options_.slotBytes;
  if (local.ok() && options.policy != P2pPolicy::Off) local = f->allocate();
  if (local.ok() && f->own_) local = cuda::cudaStatus(cudaIpcGetMemHandle(&mine.handle, f->own_), "cudaIpcGetMemHandle");
  mine.ok = local.ok() && options.policy != P2pPolicy::Off;
  mine.address = reinterpret_cast<uintptr_t>(f->own_);
  if (!local.ok()) setWhy(&mine, fmt::format("rank {}: {}", f->rank_, local.message()));
  if (options.policy == P2pPolicy::Off) setWhy(&mine, fmt::format("rank {} has LOOM_DEVICE_PLANS=0", f->rank_));

  std::vector<P2pOffer> offers(f->nranks_);
  LOOM_TRY(exchange.allGather(&mine, offers.data(), sizeof mine).withContext("p2p transport setup"));
  std::vector<P2pPolicy> policies;
  std::vector<P2pEndpoint> endpoints;
  for (const P2pOffer& o : offers) {
    policies.push_back(static_cast<P2pPolicy>(o.policy));
    endpoints.push_back(P2pEndpoint{o.hostHash, std::string(o.busId, strnlen(o.busId, sizeof o.busId))});
  }
  const P2pPolicy policy = combineP2pPolicies(policies);
  for (int r = 0; r < f->nranks_ && why->empty(); ++r)
    if (!offers[r].ok) *why = offers[r].why;
  for (int r = 1; r < f->nranks_ && why->empty(); ++r)
    if (offers[r].nchannels != offers[0].nchannels || offers[r].nslots != offers[0].nslots ||
        offers[r].slotBytes != offers[0].slotBytes)
      *why = fmt::format("ranks 0 and {} lay out their FIFOs differently ({} and {} channels, {} and {} slots of {} and "
                         "{} bytes): LOOM_DEVICE_NCHANNELS, LOOM_FIFO_SLOTS and LOOM_CHUNK_BYTES must agree",
                         r, offers[0].nchannels, offers[r].nchannels, offers[0].nslots, offers[r].nslots,
                         offers[0].slotBytes, offers[r].slotBytes);
  for (int a = 0; a < f->nranks_ && why->empty(); ++a)
    for (int b = a + 1; b < f->nranks_ && why->empty(); ++b)
      *why = p2pPairRefusal(endpoints[a], a, endpoints[b], b, policy);
  if (!why->empty()) return Status::Ok();  // every rank saw the same offers and stops here
  f->laneBudget_ = agreedLaneBudget(offers);

  // Second round: whether every rank could map every peer's block.
  const std::string mapFailure = f->mapPeers(offers);
  P2pOffer mapped;
  mapped.ok = mapFailure.empty();
  setWhy(&mapped, mapFailure);
  std::vector<P2pOffer> results(f->nranks_);
  LOOM_TRY(exchange.allGather(&mapped, results.data(), sizeof mapped).withContext("p2p transport setup"));
  for (int r = 0; r < f->nranks_ && why->empty(); ++r)
    if (!results[r].ok) *why = results[r].why;
  if (!why->empty()) return Status::Ok();

  const size_t n = static_cast<size_t>(f->nranks_) * f->options_.nchannels;
  f->sends_.assign(n, cuda::DeviceFifo{});
  f->recvs_.assign(n, cuda::DeviceFifo{});
  for (int peer = 0; peer < f->nranks_; ++peer) {
    if (peer == f->rank_) continue;
    for (uint32_t c = 0; c < f->options_.nchannels; ++c) {
      const size_t i = static_cast<size_t>(peer) * f->options_.nchannels + c;
      f->sends_[i] = f->fifoIn(f->blocks_[peer], peer, f->rank_, c, f->sameProcess_[peer]);
      f->recvs_[i] = f->fifoIn(f->own_, f->rank_, peer, c, f->sameProcess_[peer]);
    }
  }
  LOOM_INFO(Init,
            "rank {}: p2p FIFOs on GPU {} ({} KiB, {} channel(s) x {} slots of {} KiB per peer; launches of at most {} "
            "blocks)",
            f->rank_, mine.busId, f->ownBytes_ >> 10, f->options_.nchannels, f->options_.nslots,
            f->options_.slotBytes >> 10, f->laneBudget_);
  *out = std::move(f);
  return Status::Ok();
}

}  // namespace loom
