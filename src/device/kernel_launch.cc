// One launch of plan kernels (plan_kernels.h): the plans of a run of same-dtype operations encoded as
// one sequence in pinned memory, their temporaries allocated on the stream, the encoding copied to the
// GPU and the kernel enqueued. Nothing is enqueued before every plan was encoded, so that a refusal
// leaves the user's memory as it was.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>

#include "base/datatype.h"
#include "base/env.h"
#include "device/memory_kind.h"
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
  if (envString("LOOM_P2P_DIRECT", "1") == "0") return direct;
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

}  // namespace

Status PlanKernels::launchRun(std::vector<KernelPlan>& plans, size_t first, size_t end, loomStream_t stream,
                              bool captured) {
  const P2pFifos& fifos = *fifos_;
  const loomDataType_t dtype = plans[first].dtype;
  auto launch = std::make_shared<KernelLaunch>();
  cudaMemPool_t pool = nullptr;
  LOOM_TRY(launchPool(fifos.device(), &pool));
  StreamTemporaries temps(stream, pool);
  std::vector<StagedSend> stagedSends;
  const size_t n = end - first;
  std::vector<std::vector<uint8_t>> direct(n);
  std::vector<std::vector<cuda::DeviceFifo>> sends(n), recvs(n);
  std::vector<DevicePlanBindings> bindings(n);
  std::vector<size_t> planBytes(n), firstStatus(n);
  size_t lanes = 0;
  uint32_t blocks = 0;
  for (size_t k = 0; k < n; ++k) {
    KernelPlan& kp = plans[first + k];
    if (kp.plan->coll != Collective::SendRecv) {
      if (kp.stageFrom) {
        LOOM_TRY(temps.allocate(kp.stageBytes, &kp.buffers[kSendBuffer]));
        stagedSends.push_back({kp.buffers[kSendBuffer], &kp});
      }
      LOOM_TRY(temps.allocate(kp.plan->scratchElems * kp.elemSize, &kp.buffers[kScratchBuffer]));
    }
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
    planBytes[k] = devicePlanBytes(*kp.plan, b);
    firstStatus[k] = lanes;
    lanes += kp.plan->lanes.size();
    blocks = std::max(blocks, static_cast<uint32_t>(kp.plan->lanes.size()));
  }
  if (blocks == 0) return Status::Ok();
  // Every block of every rank sharing the GPU must be resident at once: a launch beyond this rank's
  // share could leave a peer's blocks waiting for SMs that this launch holds.
  if (blocks > fifos.residentShare())
    return errorStatus(loomInvalidUsage,
                       "{}: {} needs {} thread blocks at once, more than the {} that each rank's share of its GPU "
                       "holds resident: use fewer ranks per GPU",
                       facts_.describe, plans[first].describe(), blocks, fifos.residentShare());
  const DevicePlanSequenceLayout layout = layoutDevicePlanSequence(planBytes);
  const size_t statusBytes = lanes * sizeof(cuda::DeviceLaneStatus);
  // A slot of the ring: nothing allocated (plan_slots.h); a large encoding, or one that a graph keeps
  // for the communicator's lifetime, takes pooled memory.
  const bool slotted = !captured && layout.total + statusBytes <= slots_.slotBytes();
  char* onDevice = nullptr;
  if (slotted) {
    LOOM_TRY(takeSlot(launch.get()));
    onDevice = slots_.device(launch->slot);
  } else {
    LOOM_TRY(launch->blob.acquire(layout.total + statusBytes));
    LOOM_TRY(temps.allocate(layout.total, &onDevice));
  }
  std::byte* blob = reinterpret_cast<std::byte*>(slotted ? slots_.host(launch->slot) : launch->blob.data());
  std::memset(blob, 0, layout.total + statusBytes);
  launch->statuses = reinterpret_cast<cuda::DeviceLaneStatus*>(blob + layout.total);
  writeDevicePlanSequenceHeader(layout, blocks, std::span(blob, layout.total));
  for (size_t k = 0; k < n; ++k) {
    KernelPlan& kp = plans[first + k];
    bindings[k].laneStatus = launch->statuses + firstStatus[k];
    cuda::DevicePlanShape shape;
    Status encoded = encodeDevicePlan(*kp.plan, bindings[k], std::span(blob + layout.offsets[k], planBytes[k]), &shape);
    if (!encoded.ok()) return encoded.withContext(kp.describe());
    launch->entries.push_back({kp.plan, kp.describe, firstStatus[k]});
  }

  // Nothing is enqueued before this point but allocations: a refusal above leaves the user's memory as it was.
  for (const StagedSend& s : stagedSends) LOOM_TRY(enqueueStagedSend(s, stream));
  LOOM_CUDA_TRY(cudaMemcpyAsync(onDevice, blob, layout.total, cudaMemcpyHostToDevice, stream));
  LOOM_TRY(cudaStatus(cuda::launchDevicePlanSequence(onDevice, blocks, dtype, stream), "launching the plan kernel"));
  if (!captured) LOOM_TRY(launch->done.record(stream));
  std::lock_guard<std::mutex> lock(mutex_);
  if (captured)
    captured_.push_back(std::move(launch));
  else
    launches_.push_back(std::move(launch));
  return Status::Ok();
}

}  // namespace loom::device
