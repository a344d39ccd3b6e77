// Encodes one rank's plan for one operation into the flat layout of kernels/cuda/device_plan_layout.h,
// which a kernel can read from device memory (kernels/cuda/plan_kernel.cu) and a host thread from host
// memory (the tests' emulation): the same bytes serve both. The interpreter that runs it is
// kernels/cuda/plan_interpreter.cuh. It lives in the device layer because it reads algorithms' Plan
// (kernels do not depend on algorithms); CUDA builds only.
//
// The encoding holds the lanes and steps of algorithms/plan.h and a connection table: for every (peer,
// channel) the FIFO this rank sends into and the FIFO it receives from. It holds nothing of one call:
// the buffers (send, recv, scratch, point-to-point buffers), the operator and where the lanes report
// are the call's (DevicePlanCall, a kernel parameter), so an encoding serves every call of its shape. Messages follow the host FIFO protocol of
// transport/memory_fifo.h: slots live in the receiver's memory; the sender publishes a message
// by advancing `tail`, the receiver frees its slot by advancing `head`; counters only grow.
//
// No CUDA header is needed to include this file; everything in it is host code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "algorithms/plan.h"
#include "base/status.h"
#include "kernels/cuda/device_plan_layout.h"

namespace loom::device {

using cuda::DeviceFifo;
using cuda::DeviceLaneStatus;
using cuda::DevicePlanCall;
using cuda::DevicePlanShape;

static_assert(cuda::kNoDeviceBuffer == kNoBuffer);

// Everything besides the plan that a launch binds: connections and how to stop (in the encoding), and
// the call's memory, operator and lane statuses (in its DevicePlanCall).
struct DevicePlanBindings {
  loomDataType_t dtype = loomUint8;
  // The operator as the executor sees it (core/run/planner.cc): for PreMulSum the caller scales its input
  // into a staged copy first and passes a plain Sum, since every rank may have its own scalar.
  ReduceOp op;
  std::span<char* const> buffers;     // by plan buffer index (kSendBuffer, ...); those the plan names must be set
  uint32_t nchannels = 1;             // channels in the FIFO tables (at least the plan's)
  std::span<const DeviceFifo> sends;  // [peer * nchannels + channel]: FIFOs in the peers' memory this rank fills
  std::span<const DeviceFifo> recvs;  // [peer * nchannels + channel]: FIFOs in this rank's memory peers fill
  // By plan buffer index: non-zero where a sender may write into the buffer directly (the receiving
  // FIFO has posts, kernels/cuda/device_plan_layout.h's DeviceDirectPost, and the buffer is writable
  // from the senders' GPUs). Missing entries: no.
  std::span<const uint8_t> directBuffers;
  // Read while waiting: non-zero stops every lane with Aborted. A lane that fails for another reason
  // sets it, so that the rank's other lanes stop too instead of waiting out the timeout.
  uint32_t* abort = nullptr;
  DeviceLaneStatus* laneStatus = nullptr;  // one per lane; zero it before each launch
  uint64_t timeoutNs = 0;
  // Messages of at most this many bytes travel as low-latency words where their FIFO has the slots
  // (kernels/cuda/device_plan_layout.h); 0: never. Every rank must encode with the same value.
  uint64_t lowLatencyBytes = 0;
  // Every lane times the parts of its steps into its status (DeviceLaneProfile; LOOM_DEVICE_PROFILE).
  bool profile = false;
  // Peer-memory plans (Meet and steps naming another rank's buffers): by rank, its boards
  // (cuda::DevicePeerBoard[boardChannels]) as this rank sees them, coherent at boardScope. Empty: such
  // plans are refused.
  std::span<cuda::DevicePeerBoard* const> boards;
  uint32_t boardChannels = 0;
  cuda::FifoScope boardScope = cuda::FifoScope::System;
  // Ranks in other processes: their published buffers are translated through this table (device
  // memory, device/peer_windows.h); null where every rank addresses every buffer as published.
  const cuda::DeviceWindowTable* windows = nullptr;
};

// Bytes the encoding of `plan` with these bindings takes.
size_t devicePlanBytes(const Plan& plan, const DevicePlanBindings& bindings);

// Encodes `plan` into `out` (16-byte aligned, at least devicePlanBytes), after checking that the
// bindings can carry it: every buffer and FIFO the plan names is bound, every message fits its FIFO's
// slots, local copies do not partially overlap. loomInvalidArgument says what does not fit. The
// checks of buffers hold for every later call whose buffers are null, equal and overlapping alike
// (device/plan_cache.h keys encodings so).
Status encodeDevicePlan(const Plan& plan, const DevicePlanBindings& bindings, std::span<std::byte> out,
                        DevicePlanShape* shape);

// The call of an encoded plan with these bindings: their buffers (more than kInlineBuffers through
// `bufferTable`, a device-readable copy of bindings.buffers), operator and lane statuses.
Status bindDevicePlanCall(const Plan& plan, const DevicePlanBindings& bindings, char* const* bufferTable,
                          DevicePlanCall* call);

// A sequence of encoded plans for one launch (kernels/cuda/device_plan_layout.h's DevicePlanSequence):
// where each of `planBytes.size()` plans starts (16-byte aligned) and the total bytes.
struct DevicePlanSequenceLayout {
  std::vector<size_t> offsets;
  size_t total = 0;
};
DevicePlanSequenceLayout layoutDevicePlanSequence(std::span<const size_t> planBytes);
// The same into *out, whose offsets keep their capacity (a launch allocates nothing for it).
void layoutDevicePlanSequence(std::span<const size_t> planBytes, DevicePlanSequenceLayout* out);
// Writes the sequence's header and offset table at the start of `out`; the plans are encoded at
// their offsets by encodeDevicePlan. `blocks`: the most lanes of any of the plans.
void writeDevicePlanSequenceHeader(const DevicePlanSequenceLayout& layout, uint32_t blocks, std::span<std::byte> out);

// The operation's result from its lanes' statuses: Ok when every lane is Done, else the first
// failure, naming the lane, step and peer (loomRemoteError for an abort, loomTimeout, loomInvalidUsage
// for a size mismatch, loomInternalError otherwise).
Status devicePlanResult(const Plan& plan, std::span<const DeviceLaneStatus> statuses);

}  // namespace loom::device
