// One launch of plan kernels (plan_kernels.h): the plans of a run of same-dtype operations as one
// sequence, found on the device by shape (plan_cache.h) or encoded and copied there; their temporaries
// in the communicator's workspace; the launch's calls (buffers, operator, lane statuses) passed as the
// kernel's parameter. A call of a shape seen before allocates nothing and copies nothing to the GPU.
// Nothing is enqueued before every plan was encoded, so that a refusal leaves the user's memory as it
// was.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <span>

#include "base/datatype.h"
#include "device/memory_kind.h"
#include "device/plan_cache.h"
#include "device/plan_encoder.h"
#include "device/plan_kernels.h"
#include "device/stream_capture.h"
#include "device/stream_pool.h"
#include "kernels/cuda/cuda_reduce.h"
#include "kernels/cuda/plan_launch.h"

namespace loom::device {
namespace {

// Which of a plan's buffers the senders may write into directly (single copy, the p2p transport's
// direct mode): none with LOOM_P2P_DIRECT=0; all when every peer that could (a rank of this process)
// is on this GPU; else those that peer access opens to other GPUs (the user's cudaMalloc'd buffers,
// not the launch's temporaries). Receivers decide alone: a sender writes only where one posted.
// Into *out (its capacity kept from launch to launch).
void directBuffersOf(const P2pFifos& fifos, bool p2pDirect, const std::vector<char*>& buffers, std::vector<uint8_t>* out) {
  std::vector<uint8_t>& direct = *out;
  direct.clear();
  if (!p2pDirect) return;
  direct.assign(buffers.size(), 1);
  if (!fifos.directPeersOnOtherGpus()) return;
  for (size_t i = 0; i < buffers.size(); ++i) direct[i] = buffers[i] && coveredByPeerAccess(buffers[i]) ? 1 : 0;
}

// The transport's FIFO table ([peer * nchannels + channel]) cut down to the first `used` channels, so
// that a small operation's encoding (copied to the GPU at every launch) does not carry 32 channels.
// Into *out (its capacity kept).
void fifoTable(std::span<const cuda::DeviceFifo> all, uint32_t nchannels, uint32_t used, std::vector<cuda::DeviceFifo>* out) {
  std::vector<cuda::DeviceFifo>& table = *out;
  table.clear();
  const size_t nranks = all.size() / nchannels;
  for (size_t peer = 0; peer < nranks; ++peer)
    for (uint32_t c = 0; c < used; ++c) table.push_back(all[peer * nchannels + c]);
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

// One launchRun's working state, filled step by step: plans [first, first + n) of `plans`. The
// communicator keeps one (launches are made one at a time, under its lock) and starts it afresh for
// each run, so that its vectors keep their capacity: a launch of a shape seen before allocates nothing.
struct PlanKernels::Run {
  void start(std::vector<KernelPlan>& all, size_t from, size_t end, cudaStream_t on, bool inCapture,
             std::shared_ptr<KernelLaunch> fresh) {
    plans = &all, first = from, n = end - from, stream = on, captured = inCapture, launch = std::move(fresh);
    eager.reset();
    pool = nullptr;
    relaxed.reset();
    stagedAt.assign(n, SIZE_MAX);
    scratchAt.assign(n, SIZE_MAX);
    tempBytes = 0, temps = nullptr;
    stagedSends.clear();
    direct.resize(n), sends.resize(n), recvs.resize(n), bindings.resize(n), planBytes.resize(n), firstStatus.resize(n);
    key.resize(n), calls.resize(n);
    cacheable = false, lanes = 0, blocks = 0;
    cached = nullptr;
    tables = false, statusBytes = tableBytes = encodedBytes = 0, slotted = false;
    hostBlock = nullptr, encodingHost = nullptr, sequence = nullptr, sequenceToFree = nullptr, tableDevice = nullptr;
    tableTemps.reset();
    args = cuda::DeviceLaunchArgs{};
  }
  // What must not outlive the run: the capture mode switched back, temporary tables freed behind the
  // kernel, the launch let go of.
  void finish() {
    relaxed.reset();
    tableTemps.reset();
    launch.reset();
    eager.reset();
  }
  KernelPlan& plan(size_t k) { return (*plans)[first + k]; }

  std::vector<KernelPlan>* plans = nullptr;
  size_t first = 0, n = 0;
  cudaStream_t stream = nullptr;
  bool captured = false;
  std::shared_ptr<KernelLaunch> launch;
  std::shared_ptr<KernelLaunch> eager;  // once enqueued, when not captured: what launch() orders after
  cudaMemPool_t pool = nullptr;
  // Switched while this run allocates or reads events: a capture in global mode, in any thread, would
  // refuse those calls (and be invalidated by them). Only then: each switch is two runtime calls.
  std::optional<RelaxedCaptureMode> relaxed;
  void relaxCapture() {
    if (!relaxed) relaxed.emplace();
  }

  // placeTemporaries: offsets in one region of temporaries (SIZE_MAX: none), and the region.
  std::vector<size_t> stagedAt, scratchAt;
  size_t tempBytes = 0;
  char* temps = nullptr;
  std::vector<StagedSend> stagedSends;

  // bindPlans: what each plan is bound to, its encoded size and its shape on the device.
  std::vector<std::vector<uint8_t>> direct;
  std::vector<std::vector<cuda::DeviceFifo>> sends, recvs;
  std::vector<DevicePlanBindings> bindings;
  std::vector<size_t> planBytes, firstStatus;
  std::vector<PlanShapeKey> key;
  bool cacheable = false;
  size_t lanes = 0;
  uint32_t blocks = 0;

  // reserveHostBlock: the lanes' statuses, then the call tables, then an encoding on its way.
  const PlanCache::Entry* cached = nullptr;
  DevicePlanSequenceLayout layout;
  bool tables = false;
  size_t statusBytes = 0, tableBytes = 0, encodedBytes = 0;
  bool slotted = false;
  char* hostBlock = nullptr;
  std::byte* encodingHost = nullptr;  // where encodeOrFind writes the encoding (the block, or pageable)

  // encodeOrFind: the sequence on the device; one not cached is freed behind the kernel.
  const char* sequence = nullptr;
  char* sequenceToFree = nullptr;

  // bindCalls: the kernel's parameter, and tables in device memory when it cannot hold the calls.
  std::vector<cuda::DevicePlanCall> calls;
  char* tableDevice = nullptr;
  std::optional<StreamTemporaries> tableTemps;  // tables too large for a slot: freed behind the kernel
  cuda::DeviceLaunchArgs args;
};

void PlanKernels::RunDeleter::operator()(Run* run) const { delete run; }

Status PlanKernels::launchRun(std::vector<KernelPlan>& plans, size_t first, size_t end, loomStream_t stream,
                              bool captured, std::shared_ptr<KernelLaunch>* enqueued) {
  if (std::all_of(plans.begin() + first, plans.begin() + end, isOneRankCollective)) {
    for (size_t k = first; k < end; ++k) LOOM_TRY(enqueueOneRankCollective(plans[k], stream));
    return Status::Ok();
  }
  if (!run_) run_.reset(new Run);
  Run& run = *run_;
  run.start(plans, first, end, stream, captured, newLaunch());
  struct Finish {
    Run& run;
    ~Finish() { run.finish(); }
  } finish{run};
  LOOM_TRY(launchPool(fifos_->device(), &run.pool));
  // A captured launch's device memory is read at every replay: kept for the communicator's lifetime and
  // allocated outside the capture, so that the graph holds no memory nodes (stream_pool.h's
  // KeptDeviceMemory says why those deadlock ranks sharing a GPU).
  if (captured && !kept_) kept_ = std::make_shared<KeptDeviceMemory>(fifos_->device(), run.pool);
  LOOM_TRY(placeTemporaries(run));
  bindPlans(run);
  if (run.blocks == 0) return Status::Ok();
  // Every block of every rank sharing the GPU must be resident at once: a launch beyond this rank's
  // share could leave a peer's blocks waiting for SMs that this launch holds.
  if (run.blocks > fifos_->residentShare())
    return errorStatus(loomInvalidUsage,
                       "{}: {} needs {} thread blocks at once, more than the {} that each rank's share of its GPU "
                       "holds resident: use fewer ranks per GPU",
                       facts_.describe, plans[first].label.text(), run.blocks, fifos_->residentShare());
  LOOM_TRY(reserveHostBlock(run));
  LOOM_TRY(encodeOrFind(run));
  LOOM_TRY(bindCalls(run));
  LOOM_TRY(enqueueRun(run));
  if (run.eager) *enqueued = std::move(run.eager);
  return Status::Ok();
}

Status PlanKernels::placeTemporaries(Run& run) {
  auto carve = [&](size_t bytes) {
    const size_t at = run.tempBytes;
    run.tempBytes += (bytes + 255) / 256 * 256;  // each piece aligned as an allocation would be
    return at;
  };
  for (size_t k = 0; k < run.n; ++k) {
    const KernelPlan& kp = run.plan(k);
    if (kp.plan->coll == Collective::SendRecv) continue;
    if (kp.stageFrom) run.stagedAt[k] = carve(kp.stageBytes);
    if (const size_t bytes = kp.plan->scratchElems * kp.elemSize; bytes > 0) run.scratchAt[k] = carve(bytes);
  }
  if (run.tempBytes == 0) return Status::Ok();
  if (run.captured || !workspace_.holds(run.tempBytes)) run.relaxCapture();  // memory is allocated
  if (run.captured) return kept_->allocate(run.tempBytes, &run.temps);
  return workspace_.reserve(run.tempBytes, run.pool, run.stream, &run.temps);
}

void PlanKernels::bindPlans(Run& run) {
  const P2pFifos& fifos = *fifos_;
  run.cacheable = !run.captured;  // a graph keeps its own encoding (kept memory, launchRun)
  for (size_t k = 0; k < run.n; ++k) {
    KernelPlan& kp = run.plan(k);
    if (run.stagedAt[k] != SIZE_MAX) {
      kp.buffers[kSendBuffer] = run.temps + run.stagedAt[k];
      run.stagedSends.push_back({kp.buffers[kSendBuffer], &kp});
    }
    if (kp.plan->coll != Collective::SendRecv)
      kp.buffers[kScratchBuffer] = run.scratchAt[k] != SIZE_MAX ? run.temps + run.scratchAt[k] : nullptr;
    directBuffersOf(fifos, p2pDirect_, kp.buffers, &run.direct[k]);
    DevicePlanBindings& b = run.bindings[k];
    b = DevicePlanBindings{};
    b.dtype = kp.dtype;
    b.op = kp.op;
    b.buffers = kp.buffers;
    b.directBuffers = run.direct[k];
    b.nchannels = std::clamp<uint32_t>(kp.plan->nchannels, 1, fifos.nchannels());
    fifoTable(fifos.sends(), fifos.nchannels(), b.nchannels, &run.sends[k]);
    fifoTable(fifos.recvs(), fifos.nchannels(), b.nchannels, &run.recvs[k]);
    b.sends = run.sends[k];
    b.recvs = run.recvs[k];
    b.abort = const_cast<uint32_t*>(abortFlag_.device);
    b.timeoutNs = static_cast<uint64_t>(std::max<int64_t>(facts_.timeoutMs, 0)) * 1000000u;
    b.lowLatencyBytes = lowLatencyBytes_;
    b.profile = profile_;
    b.boards = fifos.boards();  // empty unless every rank runs on this GPU (P2pFifos::peerReach)
    b.boardChannels = fifos.nchannels();
    b.boardScope = fifos.boardScope();
    // Ranks in other processes: peers' buffers are translated through the windows' table. (A launch
    // of a peer-memory plan comes only after a window was mapped: core chooses one only for buffers
    // in windows.)
    b.windows = fifos.peerReach() == PeerReach::Windows && windows_ ? windows_->deviceTable() : nullptr;
    run.planBytes[k] = devicePlanBytes(*kp.plan, b);
    run.firstStatus[k] = run.lanes;
    run.lanes += kp.plan->lanes.size();
    run.blocks = std::max(run.blocks, static_cast<uint32_t>(kp.plan->lanes.size()));
    run.cacheable = run.cacheable && kp.buffers.size() <= cuda::kInlineBuffers;
    if (run.cacheable) {
      const size_t scratch = kp.plan->scratchElems * kp.elemSize;
      const size_t extents[] = {kp.stageFrom ? kp.stageBytes : kp.sendBytes, kp.recvBytes, scratch};
      PlanShapeKey& key = run.key[k];  // filled in place: its vectors keep their capacity
      key.plan = kp.plan.get();
      key.dtype = kp.dtype;
      key.nchannels = b.nchannels;
      key.direct.assign(run.direct[k].begin(), run.direct[k].end());
      bufferAliases(kp.buffers, extents, &key.aliases);
    }
  }
}

Status PlanKernels::reserveHostBlock(Run& run) {
  // Found on the device by shape, or encoded by encodeOrFind.
  run.cached = run.cacheable ? cache_.find(run.key) : nullptr;
  layoutDevicePlanSequence(run.planBytes, &run.layout);
  run.encodedBytes = run.cached ? 0 : (run.layout.total + 15) / 16 * 16;
  // The lanes' statuses, (a launch of more plans or buffers than its parameter holds) the calls and
  // buffer tables the kernel reads from device memory, and an encoding on its way to the device: in a
  // slot of the ring (nothing allocated, plan_slots.h, and kept until the launch ended, as the copy
  // from it needs); a captured launch keeps a block of its own for the communicator's lifetime.
  run.tables = run.n > cuda::kInlinePlans ||
               std::any_of(run.plans->begin() + run.first, run.plans->begin() + run.first + run.n,
                           [](const KernelPlan& kp) { return kp.buffers.size() > cuda::kInlineBuffers; });
  run.statusBytes = (run.lanes * sizeof(cuda::DeviceLaneStatus) + 15) / 16 * 16;
  if (run.tables) {
    run.tableBytes = run.n * sizeof(cuda::DevicePlanCall);
    for (size_t k = 0; k < run.n; ++k)
      if (run.plan(k).buffers.size() > cuda::kInlineBuffers) run.tableBytes += run.plan(k).buffers.size() * sizeof(char*);
    run.tableBytes = (run.tableBytes + 15) / 16 * 16;
  }
  // An eager launch whose encoding does not fit its slot beside the statuses and tables sends it from
  // pageable memory (KernelLaunch::pageableEncoding says why not a pinned block).
  const bool pageable = !run.captured && run.statusBytes + run.tableBytes <= slots_.slotBytes() &&
                        run.statusBytes + run.tableBytes + run.encodedBytes > slots_.slotBytes();
  const size_t hostBytes = run.statusBytes + run.tableBytes + (pageable ? 0 : run.encodedBytes);
  run.slotted = !run.captured && hostBytes <= slots_.slotBytes();
  if (run.slotted) {
    LOOM_TRY(takeSlot(run.launch.get()));
  } else {
    run.relaxCapture();  // a pinned block may be allocated
    LOOM_TRY(run.launch->blob.acquire(hostBytes));
  }
  run.hostBlock = run.slotted ? slots_.host(run.launch->slot) : run.launch->blob.data();
  if (pageable) {
    run.launch->pageableEncoding.resize(run.encodedBytes);
    run.encodingHost = run.launch->pageableEncoding.data();
  } else {
    run.encodingHost = reinterpret_cast<std::byte*>(run.hostBlock + run.statusBytes + run.tableBytes);
  }
  std::memset(run.hostBlock, 0, run.statusBytes);
  run.launch->statuses = reinterpret_cast<cuda::DeviceLaneStatus*>(run.hostBlock);
  return Status::Ok();
}

Status PlanKernels::encodeOrFind(Run& run) {
  if (run.cached) {
    run.sequence = run.cached->sequence;
    return Status::Ok();
  }
  // A shape not on the device: encoded now (the buffers' checks happen here, before anything is
  // enqueued) and copied there.
  run.relaxCapture();
  std::byte* blob = run.encodingHost;
  writeDevicePlanSequenceHeader(run.layout, run.blocks, std::span(blob, run.layout.total));
  for (size_t k = 0; k < run.n; ++k) {
    cuda::DevicePlanShape shape;
    Status encoded = encodeDevicePlan(*run.plan(k).plan, run.bindings[k],
                                      std::span(blob + run.layout.offsets[k], run.planBytes[k]), &shape);
    if (!encoded.ok()) return encoded.withContext(run.plan(k).label.text());
  }
  char* onDevice = nullptr;
  if (run.captured) {
    LOOM_TRY(kept_->upload(blob, run.layout.total, &onDevice));  // outside the capture: no copy node
    run.sequence = onDevice;
    return Status::Ok();
  }
  void* p = nullptr;
  LOOM_CUDA_TRY(cudaMallocFromPoolAsync(&p, run.layout.total, run.pool, run.stream));
  onDevice = static_cast<char*>(p);
  LOOM_CUDA_TRY(cudaMemcpyAsync(onDevice, blob, run.layout.total, cudaMemcpyHostToDevice, run.stream));
  run.sequence = onDevice;
  if (!run.cacheable) {
    run.sequenceToFree = onDevice;  // after the kernel, in stream order
    return Status::Ok();
  }
  PlanCache::Entry entry{onDevice, {}};
  for (size_t k = 0; k < run.n; ++k) entry.plans.push_back(run.plan(k).plan);
  std::vector<char*> evicted;
  cache_.insert(std::move(run.key), std::move(entry), &evicted);
  for (char* old : evicted) LOOM_CUDA_TRY(cudaFreeAsync(old, run.stream));  // behind the launches that used it
  return Status::Ok();
}

Status PlanKernels::bindCalls(Run& run) {
  run.args.sequence = run.sequence;
  char* tableHost = run.hostBlock + run.statusBytes;
  if (run.tables) {
    run.relaxCapture();
    if (run.captured) {
      LOOM_TRY(kept_->allocate(run.tableBytes, &run.tableDevice));
    } else if (run.slotted) {
      run.tableDevice = slots_.device(run.launch->slot) + run.statusBytes;
    } else {
      run.tableTemps.emplace(run.stream, run.pool);
      LOOM_TRY(run.tableTemps->allocate(run.tableBytes, &run.tableDevice));
    }
  }
  size_t bufferTableAt = run.n * sizeof(cuda::DevicePlanCall);
  for (size_t k = 0; k < run.n; ++k) {
    KernelPlan& kp = run.plan(k);
    run.bindings[k].laneStatus = run.launch->statuses + run.firstStatus[k];
    char* const* bufferTable = nullptr;
    if (kp.buffers.size() > cuda::kInlineBuffers) {
      std::memcpy(tableHost + bufferTableAt, kp.buffers.data(), kp.buffers.size() * sizeof(char*));
      bufferTable = reinterpret_cast<char* const*>(run.tableDevice + bufferTableAt);
      bufferTableAt += kp.buffers.size() * sizeof(char*);
    }
    // (The operation's description is formatted only for a failure: it allocates.)
    if (Status bound = bindDevicePlanCall(*kp.plan, run.bindings[k], bufferTable, &run.calls[k]); !bound.ok())
      return bound.withContext(kp.label.text());
    run.launch->entries.push_back({kp.plan, kp.label, run.firstStatus[k], kp.seq});
  }
  if (run.tables) {
    std::memcpy(tableHost, run.calls.data(), run.n * sizeof(cuda::DevicePlanCall));
    run.args.callTable = reinterpret_cast<const cuda::DevicePlanCall*>(run.tableDevice);
  } else {
    std::copy(run.calls.begin(), run.calls.end(), run.args.calls);
  }
  return Status::Ok();
}

Status PlanKernels::enqueueRun(Run& run) {
  // Nothing is enqueued before this point but allocations and the encoding's copy: a refusal before it
  // leaves the user's memory as it was.
  if (run.tables) {
    const char* tableHost = run.hostBlock + run.statusBytes;
    if (run.captured)
      LOOM_TRY(kept_->copy(run.tableDevice, tableHost, run.tableBytes));  // outside the capture: no copy node
    else
      LOOM_CUDA_TRY(cudaMemcpyAsync(run.tableDevice, tableHost, run.tableBytes, cudaMemcpyHostToDevice, run.stream));
  }
  for (const StagedSend& s : run.stagedSends) LOOM_TRY(enqueueStagedSend(s, run.stream));
  LOOM_TRY(cudaStatus(cuda::launchDevicePlanSequence(run.args, run.blocks, run.plan(0).dtype, run.stream),
                      "launching the plan kernel"));
  if (run.sequenceToFree) LOOM_CUDA_TRY(cudaFreeAsync(run.sequenceToFree, run.stream));
  if (!run.captured) LOOM_TRY(run.launch->done.record(run.stream));
  std::lock_guard<std::mutex> lock(mutex_);
  if (run.captured) {
    captured_.push_back(std::move(run.launch));
  } else {
    run.eager = run.launch;
    launches_.push_back(std::move(run.launch));
  }
  return Status::Ok();
}

}  // namespace loom::device
