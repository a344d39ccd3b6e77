// One launch of plan kernels (plan_kernels.h): the plans of a run of same-dtype operations as one
// sequence, found on the device by shape (plan_cache.h) or encoded and copied there; their temporaries
// in the communicator's workspace; the launch's calls (buffers, operator, lane statuses) passed as the
// kernel's parameter. A call of a shape seen before allocates nothing and copies nothing to the GPU.
// Nothing is enqueued before every plan was encoded, so that a refusal leaves the user's memory as it
// was.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>

#include "base/datatype.h"
#include "base/settings.h"
#include "device/memory_kind.h"
#include "device/plan_cache.h"
#include "device/plan_encoder.h"
#include "device/plan_kernels.h"
#include "device/stream_pool.h"
#include "kernels/cuda/cuda_reduce.h"
#include "kernels/cuda/plan_launch.h"

namespace loom::device {
namespace {

// Which of a plan's buffers the senders may write into directly (single copy, the p2p transport's
// direct mode): none with LOOM_P2P_DIRECT=0; all when every peer that could (a rank of this process)
// is on this GPU; else those that peer access opens to other GPUs (the user's cudaMalloc'd buffers,
// not the launch's temporaries). Receivers decide alone: a sender writes only where one posted.
std::vector<uint8_t> directBuffersOf(const P2pFifos& fifos, const std::vector<char*>& buffers) {
  std::vector<uint8_t> direct;
  if (!settingFlag(Setting::P2pDirect)) return direct;
  direct.assign(buffers.size(), 1);
  if (!fifos.directPeersOnOtherGpus()) return direct;
  for (size_t i = 0; i < buffers.size(); ++i) direct[i] = buffers[i] && coveredByPeerAccess(buffers[i]) ? 1 : 0;
  return direct;
}

// The transport's FIFO table ([peer * nchannels + channel]) cut down to the first `used` channels, so
// that a small operation's encoding (copied to the GPU at every launch) does not carry 32 channels.
std::vector<cuda::DeviceFifo> fifoTable(std::span<const cuda::DeviceFifo> all, uint32_t nchannels, uint32_t used) {
  std::vector<cuda::DeviceFifo> table;
  const size_t nranks = all.size() / nchannels;
  table.reserve(nranks * used);
  for (size_t peer = 0; peer < nranks; ++peer)
    for (uint32_t c = 0; c < used; ++c) table.push_back(all[peer * nchannels + c]);
  return table;
}

// The plan's input when it cannot be the user's: a copy (an input that overlaps the output in a way
// the plan cannot take), or for PreMulSum a copy scaled by this rank's scalar (the plan is a sum).
struct StagedSend {
  char* to;
  const KernelPlan* from;
};

Status enqueueStagedSend(const StagedSend& s, cudaStream_t stream) {
  const KernelPlan& kp = *s.from;
  if (kp.stageScales)
    LOOM_CUDA_TRY(cuda::copyArrayAsync(s.to, kp.stageFrom, kp.stageBytes / dataTypeSize(kp.dtype), kp.dtype, kp.stageOp,
                                       true, stream));
  else
    LOOM_CUDA_TRY(cudaMemcpyAsync(s.to, kp.stageFrom, kp.stageBytes, cudaMemcpyDeviceToDevice, stream));
  return Status::Ok();
}

// A collective of one rank moves nothing between ranks: its output is its input (a sum, a gather or a
// broadcast of one), scaled for PreMulSum. NCCL copies too; a plan kernel's single lane would copy at
// one block's speed (~30 GB/s on an H100) where the copy engine reaches the device's copy limit.
bool isOneRankCollective(const KernelPlan& kp) {
  return kp.plan->nranks == 1 && kp.plan->coll != Collective::SendRecv;
}

Status enqueueOneRankCollective(const KernelPlan& kp, cudaStream_t stream) {
  const char* in = kp.stageFrom ? kp.stageFrom : kp.buffers[kSendBuffer];
  char* out = kp.buffers[kRecvBuffer];
  if (kp.recvBytes == 0) return Status::Ok();
  if (kp.stageScales)
    LOOM_CUDA_TRY(cuda::copyArrayAsync(out, in, kp.recvBytes / kp.elemSize, kp.dtype, kp.stageOp, true, stream));
  else if (in != out)
    LOOM_CUDA_TRY(cudaMemcpyAsync(out, in, kp.recvBytes, cudaMemcpyDeviceToDevice, stream));
  return Status::Ok();
}

}  // namespace

Status PlanKernels::launchRun(std::vector<KernelPlan>& plans, size_t first, size_t end, loomStream_t stream,
                              bool captured) {
  if (std::all_of(plans.begin() + first, plans.begin() + end, isOneRankCollective)) {
    for (size_t k = first; k < end; ++k) LOOM_TRY(enqueueOneRankCollective(plans[k], stream));
    return Status::Ok();
  }
  const P2pFifos& fifos = *fifos_;
  const loomDataType_t dtype = plans[first].dtype;
  const size_t n = end - first;
  auto launch = std::make_shared<KernelLaunch>();
  cudaMemPool_t pool = nullptr;
  LOOM_TRY(launchPool(fifos.device(), &pool));
  // A captured launch's device memory is read at every replay: kept for the communicator's lifetime and
  // allocated outside the capture, so that the graph holds no memory nodes (stream_pool.h's
  // KeptDeviceMemory says why those deadlock ranks sharing a GPU).
  if (captured && !kept_) kept_ = std::make_shared<KeptDeviceMemory>(fifos.device(), pool);

  // Temporaries (a staged or scaled input, scratch): one region, carved per plan.
  std::vector<size_t> stagedAt(n, SIZE_MAX), scratchAt(n, SIZE_MAX);
  size_t tempBytes = 0;
  auto carve = [&](size_t bytes) {
    const size_t at = tempBytes;
    tempBytes += (bytes + 255) / 256 * 256;  // each piece aligned as an allocation would be
    return at;
  };
  for (size_t k = 0; k < n; ++k) {
    const KernelPlan& kp = plans[first + k];
    if (kp.plan->coll == Collective::SendRecv) continue;
    if (kp.stageFrom) stagedAt[k] = carve(kp.stageBytes);
    if (const size_t bytes = kp.plan->scratchElems * kp.elemSize; bytes > 0) scratchAt[k] = carve(bytes);
  }
  char* temps = nullptr;
  if (tempBytes > 0) {
    if (captured)
      LOOM_TRY(kept_->allocate(tempBytes, &temps));
    else
      LOOM_TRY(workspace_.reserve(tempBytes, pool, stream, &temps));
  }
  std::vector<StagedSend> stagedSends;
  std::vector<std::vector<uint8_t>> direct(n);
  std::vector<std::vector<cuda::DeviceFifo>> sends(n), recvs(n);
  std::vector<DevicePlanBindings> bindings(n);
  std::vector<size_t> planBytes(n), firstStatus(n);
  std::vector<PlanShapeKey> key(n);
  bool cacheable = !captured;  // a graph keeps its own encoding (kept memory, above)
  size_t lanes = 0;
  uint32_t blocks = 0;
  for (size_t k = 0; k < n; ++k) {
    KernelPlan& kp = plans[first + k];
    if (stagedAt[k] != SIZE_MAX) {
      kp.buffers[kSendBuffer] = temps + stagedAt[k];
      stagedSends.push_back({kp.buffers[kSendBuffer], &kp});
    }
    if (kp.plan->coll != Collective::SendRecv)
      kp.buffers[kScratchBuffer] = scratchAt[k] != SIZE_MAX ? temps + scratchAt[k] : nullptr;
    direct[k] = directBuffersOf(fifos, kp.buffers);
    DevicePlanBindings& b = bindings[k];
    b.dtype = kp.dtype;
    b.op = kp.op;
    b.buffers = kp.buffers;
    b.directBuffers = direct[k];
    b.nchannels = std::clamp<uint32_t>(kp.plan->nchannels, 1, fifos.nchannels());
    sends[k] = fifoTable(fifos.sends(), fifos.nchannels(), b.nchannels);
    recvs[k] = fifoTable(fifos.recvs(), fifos.nchannels(), b.nchannels);
    b.sends = sends[k];
    b.recvs = recvs[k];
    b.abort = const_cast<uint32_t*>(abortFlag_.device);
    b.timeoutNs = static_cast<uint64_t>(std::max<int64_t>(facts_.timeoutMs, 0)) * 1000000u;
    b.lowLatencyBytes = lowLatencyBytes_;
    planBytes[k] = devicePlanBytes(*kp.plan, b);
    firstStatus[k] = lanes;
    lanes += kp.plan->lanes.size();
    blocks = std::max(blocks, static_cast<uint32_t>(kp.plan->lanes.size()));
    cacheable = cacheable && kp.buffers.size() <= cuda::kInlineBuffers;
    if (cacheable) {
      const size_t scratch = kp.plan->scratchElems * kp.elemSize;
      std::vector<size_t> extents{kp.stageFrom ? kp.stageBytes : kp.sendBytes, kp.recvBytes, scratch};
      key[k] = PlanShapeKey{kp.plan.get(), kp.dtype, b.nchannels, direct[k], bufferAliases(kp.buffers, extents)};
    }
  }
  if (blocks == 0) return Status::Ok();
  // Every block of every rank sharing the GPU must be resident at once: a launch beyond this rank's
  // share could leave a peer's blocks waiting for SMs that this launch holds.
  if (blocks > fifos.residentShare())
    return errorStatus(loomInvalidUsage,
                       "{}: {} needs {} thread blocks at once, more than the {} that each rank's share of its GPU "
                       "holds resident: use fewer ranks per GPU",
                       facts_.describe, plans[first].describe(), blocks, fifos.residentShare());

  // Found on the device by shape, or encoded below.
  const PlanCache::Entry* cached = cacheable ? cache_.find(key) : nullptr;
  const DevicePlanSequenceLayout layout = layoutDevicePlanSequence(planBytes);
  const size_t encodedBytes = cached ? 0 : (layout.total + 15) / 16 * 16;

  // The lanes' statuses, (a launch of more plans or buffers than its parameter holds) the calls and
  // buffer tables the kernel reads from device memory, and an encoding on its way to the device: in a
  // slot of the ring (nothing allocated, plan_slots.h, and kept until the launch ended, as the copy
  // from it needs); a captured launch keeps a block of its own for the communicator's lifetime.
  const bool tables = n > cuda::kInlinePlans ||
                      std::any_of(plans.begin() + first, plans.begin() + end,
                                  [](const KernelPlan& kp) { return kp.buffers.size() > cuda::kInlineBuffers; });
  const size_t statusBytes = (lanes * sizeof(cuda::DeviceLaneStatus) + 15) / 16 * 16;
  size_t tableBytes = 0;
  if (tables) {
    tableBytes = n * sizeof(cuda::DevicePlanCall);
    for (size_t k = 0; k < n; ++k)
      if (plans[first + k].buffers.size() > cuda::kInlineBuffers) tableBytes += plans[first + k].buffers.size() * sizeof(char*);
    tableBytes = (tableBytes + 15) / 16 * 16;
  }
  const size_t hostBytes = statusBytes + tableBytes + encodedBytes;
  const bool slotted = !captured && hostBytes <= slots_.slotBytes();
  if (slotted)
    LOOM_TRY(takeSlot(launch.get()));
  else
    LOOM_TRY(launch->blob.acquire(hostBytes));
  char* hostBlock = slotted ? slots_.host(launch->slot) : launch->blob.data();
  std::memset(hostBlock, 0, statusBytes);
  launch->statuses = reinterpret_cast<cuda::DeviceLaneStatus*>(hostBlock);

  // A shape not on the device: encoded now (the buffers' checks happen here, before anything is
  // enqueued) and copied there.
  char* sequenceToFree = nullptr;
  const char* sequence = cached ? cached->sequence : nullptr;
  if (!cached) {
    std::byte* blob = reinterpret_cast<std::byte*>(hostBlock + statusBytes + tableBytes);
    writeDevicePlanSequenceHeader(layout, blocks, std::span(blob, layout.total));
    for (size_t k = 0; k < n; ++k) {
      cuda::DevicePlanShape shape;
      Status encoded = encodeDevicePlan(*plans[first + k].plan, bindings[k],
                                        std::span(blob + layout.offsets[k], planBytes[k]), &shape);
      if (!encoded.ok()) return encoded.withContext(plans[first + k].describe());
    }
    char* onDevice = nullptr;
    if (captured) {
      LOOM_TRY(kept_->upload(blob, layout.total, &onDevice));  // outside the capture: no copy node
    } else {
      void* p = nullptr;
      LOOM_CUDA_TRY(cudaMallocFromPoolAsync(&p, layout.total, pool, stream));
      onDevice = static_cast<char*>(p);
      LOOM_CUDA_TRY(cudaMemcpyAsync(onDevice, blob, layout.total, cudaMemcpyHostToDevice, stream));
      if (cacheable) {
        PlanCache::Entry entry{onDevice, {}};
        for (size_t k = 0; k < n; ++k) entry.plans.push_back(plans[first + k].plan);
        std::vector<char*> evicted;
        cache_.insert(std::move(key), std::move(entry), &evicted);
        for (char* old : evicted) LOOM_CUDA_TRY(cudaFreeAsync(old, stream));  // behind the launches that used it
      } else {
        sequenceToFree = onDevice;  // after the kernel, in stream order
      }
    }
    sequence = onDevice;
  }

  // The calls: the kernel's parameter, or tables in device memory.
  StreamTemporaries tableTemps(stream, pool);  // tables too large for a slot: freed behind the kernel
  cuda::DeviceLaunchArgs args;
  args.sequence = sequence;
  std::vector<cuda::DevicePlanCall> calls(n);
  char* tableHost = hostBlock + statusBytes;
  char* tableDevice = nullptr;
  if (tables) {
    if (captured)
      LOOM_TRY(kept_->allocate(tableBytes, &tableDevice));
    else if (slotted)
      tableDevice = slots_.device(launch->slot) + statusBytes;
    else
      LOOM_TRY(tableTemps.allocate(tableBytes, &tableDevice));
  }
  size_t bufferTableAt = n * sizeof(cuda::DevicePlanCall);
  for (size_t k = 0; k < n; ++k) {
    KernelPlan& kp = plans[first + k];
    bindings[k].laneStatus = launch->statuses + firstStatus[k];
    char* const* bufferTable = nullptr;
    if (kp.buffers.size() > cuda::kInlineBuffers) {
      std::memcpy(tableHost + bufferTableAt, kp.buffers.data(), kp.buffers.size() * sizeof(char*));
      bufferTable = reinterpret_cast<char* const*>(tableDevice + bufferTableAt);
      bufferTableAt += kp.buffers.size() * sizeof(char*);
    }
    LOOM_TRY(bindDevicePlanCall(*kp.plan, bindings[k], bufferTable, &calls[k]).withContext(kp.describe()));
    launch->entries.push_back({kp.plan, kp.describe, firstStatus[k]});
  }
  if (tables) {
    std::memcpy(tableHost, calls.data(), n * sizeof(cuda::DevicePlanCall));
    args.callTable = reinterpret_cast<const cuda::DevicePlanCall*>(tableDevice);
  } else {
    std::copy(calls.begin(), calls.end(), args.calls);
  }

  // Nothing is enqueued before this point but allocations and the encoding's copy: a refusal above
  // leaves the user's memory as it was.
  if (tables) {
    if (captured)
      LOOM_TRY(kept_->copy(tableDevice, tableHost, tableBytes));  // outside the capture: no copy node
    else
      LOOM_CUDA_TRY(cudaMemcpyAsync(tableDevice, tableHost, tableBytes, cudaMemcpyHostToDevice, stream));
  }
  for (const StagedSend& s : stagedSends) LOOM_TRY(enqueueStagedSend(s, stream));
  LOOM_TRY(cudaStatus(cuda::launchDevicePlanSequence(args, blocks, dtype, stream), "launching the plan kernel"));
  if (sequenceToFree) LOOM_CUDA_TRY(cudaFreeAsync(sequenceToFree, stream));
  if (!captured) LOOM_TRY(launch->done.record(stream));
  std::lock_guard<std::mutex> lock(mutex_);
  if (captured)
    captured_.push_back(std::move(launch));
  else
    launches_.push_back(std::move(launch));
  return Status::Ok();
}

}  // namespace loom::device
