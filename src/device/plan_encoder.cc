#include "device/plan_encoder.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "base/datatype.h"

namespace loom::device {

using namespace cuda;  // the layout's types (kernels/cuda/device_plan_layout.h)

namespace {

constexpr size_t kTableAlign = 16;

size_t alignUp(size_t n) { return (n + kTableAlign - 1) / kTableAlign * kTableAlign; }

struct Layout {
  size_t lanes = 0, steps = 0, sends = 0, recvs = 0, boards = 0, total = 0;
};

// Whether a step of `plan` is a peer-memory plan's (a Meet, or naming another rank's buffer).
bool namesPeerMemory(const Step& s) {
  return s.kind == StepKind::Meet || s.kind == StepKind::ReduceRanks || !s.src.own() || !s.dst.own();
}
bool isPeerMemoryPlan(const Plan& plan) {
  for (const Lane& lane : plan.lanes)
    for (const Step& s : lane.steps)
      if (namesPeerMemory(s)) return true;
  return false;
}

size_t stepCount(const Plan& plan) {
  size_t n = 0;
  for (const Lane& lane : plan.lanes) n += lane.steps.size();
  return n;
}

Layout layoutOf(const Plan& plan, const DevicePlanBindings& b) {
  Layout l;
  l.lanes = alignUp(sizeof(DevicePlanHeader));
  l.steps = alignUp(l.lanes + plan.lanes.size() * sizeof(DeviceLane));
  l.sends = alignUp(l.steps + stepCount(plan) * sizeof(DeviceStep));
  l.recvs = alignUp(l.sends + b.sends.size() * sizeof(DeviceFifo));
  l.total = alignUp(l.recvs + b.recvs.size() * sizeof(DeviceFifo));
  if (isPeerMemoryPlan(plan)) {
    l.boards = l.total;
    l.total = alignUp(l.boards + static_cast<size_t>(plan.nranks) * sizeof(DevicePeerBoard*));
  }
  return l;
}

DeviceStepKind deviceKind(StepKind kind) {
  switch (kind) {
    case StepKind::Send: return DeviceStepKind::Send;
    case StepKind::Recv: return DeviceStepKind::Recv;
    case StepKind::RecvReduce: return DeviceStepKind::RecvReduce;
    case StepKind::RecvReduceSend: return DeviceStepKind::RecvReduceSend;
    case StepKind::RecvCopySend: return DeviceStepKind::RecvCopySend;
    case StepKind::Copy: return DeviceStepKind::Copy;
    case StepKind::Reduce: return DeviceStepKind::Reduce;
    case StepKind::Meet: return DeviceStepKind::Meet;
    case StepKind::ReduceRanks: return DeviceStepKind::ReduceRanks;
  }
  return DeviceStepKind::Copy;
}

// What each step kind reads and writes (plan.h).
struct StepUse {
  bool sends, recvs, src, dst, dstOptional;
};
StepUse useOf(StepKind kind) {
  switch (kind) {
    case StepKind::Send: return {true, false, true, false, false};
    case StepKind::Recv: return {false, true, false, true, false};
    case StepKind::RecvReduce: return {false, true, true, true, false};
    case StepKind::RecvReduceSend: return {true, true, true, false, true};
    case StepKind::RecvCopySend: return {true, true, false, false, true};
    case StepKind::Copy:
    case StepKind::Reduce:
    case StepKind::ReduceRanks: return {false, false, true, true, false};
    case StepKind::Meet: return {false, false, false, false, false};
  }
  return {};
}

// Checks each step against the bindings and encodes it, remembering which lane uses which FIFO end.
class Encoder {
 public:
  Encoder(const Plan& plan, const DevicePlanBindings& b, size_t elemSize)
      : plan_(plan), b_(b), elemSize_(elemSize), sendOwner_(b.sends.size(), -1), recvOwner_(b.recvs.size(), -1) {}

  Status step(uint32_t laneIndex, uint32_t stepIndex, DeviceStep* out) {
    const Lane& lane = plan_.lanes[laneIndex];
    const Step& s = lane.steps[stepIndex];
    where_ = fmt::format("lane {} step {} ({})", laneIndex, stepIndex, stepKindName(s.kind));
    const StepUse use = useOf(s.kind);
    if (namesPeerMemory(s)) return peerStep(lane, s, out);
    if (s.count == 0) return invalidArgument("{}: empty step", where_);
    if (s.count > std::numeric_limits<uint64_t>::max() / elemSize_)
      return invalidArgument("{}: {} elements overflow a byte count", where_, s.count);
    const uint64_t bytes = s.count * elemSize_;
    out->kind = deviceKind(s.kind);
    out->finalize = s.finalize ? 1 : 0;
    out->count = s.count;
    out->sendPeer = s.sendPeer;
    out->recvPeer = s.recvPeer;
    if (use.sends) LOOM_TRY(fifo(laneIndex, s.sendPeer, lane.channel, bytes, true, &out->sendFifo));
    if (use.recvs) LOOM_TRY(fifo(laneIndex, s.recvPeer, lane.channel, bytes, false, &out->recvFifo));
    // Small messages as low-latency words where the FIFO has their slots; both ends decide alike (the
    // same FIFO, the same bytes, the same threshold on every rank).
    const bool small = bytes <= std::min(b_.lowLatencyBytes, kLowLatencyBytes);
    if (use.sends && small && b_.sends[out->sendFifo].lowLatencySlots) out->sendLowLatency = 1;
    if (use.recvs && small && b_.recvs[out->recvFifo].lowLatencySlots) out->recvLowLatency = 1;
    if (!use.sends && s.sendPeer >= 0) return invalidArgument("{}: names a send peer it cannot use", where_);
    if (!use.recvs && s.recvPeer >= 0) return invalidArgument("{}: names a receive peer it cannot use", where_);
    const char* src = nullptr;
    const char* dst = nullptr;
    if (use.src) LOOM_TRY(buffer(s.src, bytes, "source", &src));
    if (use.dst || (use.dstOptional && s.dst.valid())) {
      LOOM_TRY(buffer(s.dst, bytes, "destination", &dst));
      out->hasDst = 1;
    }
    if (use.src) out->srcBuffer = s.src.buffer, out->srcOffset = s.src.offset;
    if (out->hasDst) out->dstBuffer = s.dst.buffer, out->dstOffset = s.dst.offset;
    // Steps that store the incoming elements unchanged may take them directly (DeviceDirectPost).
    const bool storesAsIs = s.kind == StepKind::Recv || s.kind == StepKind::RecvCopySend;
    if (storesAsIs && out->hasDst && !out->recvLowLatency && b_.recvs[out->recvFifo].posts &&
        s.dst.buffer < b_.directBuffers.size() && b_.directBuffers[s.dst.buffer])
      out->postsDst = 1;
    // Workers split an elementwise pass by position, so an element may be read by one worker after
    // another wrote it unless source and destination are the same elements or apart.
    if (src && dst) {
      const bool overlap = src < dst + bytes && dst < src + bytes;
      if (overlap && (s.kind == StepKind::Reduce || src != dst))
        return invalidArgument("{}: source and destination {} overlap", where_,
                               s.kind == StepKind::Reduce ? "must not" : "partially");
    }
    return Status::Ok();
  }

 private:
  // A step of a peer-memory plan: a Meet, or a copy or reduction over ranks' buffers (the own ones
  // checked against the bindings; a peer's are the peer's call's, seen at the first Meet).
  Status peerStep(const Lane& lane, const Step& s, DeviceStep* out) {
    if (b_.boards.size() != static_cast<size_t>(plan_.nranks))
      return invalidArgument("{}: a peer-memory plan, but no boards are bound for its {} ranks (the ranks do not "
                             "address each other's buffers)",
                             where_, plan_.nranks);
    if (plan_.nranks > kMaxPeerRanks)
      return invalidArgument("{}: a peer-memory plan of {} ranks; at most {}", where_, plan_.nranks, kMaxPeerRanks);
    if (b_.buffers.size() > kInlineBuffers)
      return invalidArgument("{}: a peer-memory plan binds {} buffers; its board holds {}", where_, b_.buffers.size(),
                             kInlineBuffers);
    if (lane.channel >= b_.boardChannels)
      return invalidArgument("{}: channel {}, but the boards have {}", where_, lane.channel, b_.boardChannels);
    for (int q = 0; q < plan_.nranks; ++q)
      if (!b_.boards[static_cast<size_t>(q)]) return invalidArgument("{}: no board bound for rank {}", where_, q);
    out->kind = deviceKind(s.kind);
    out->finalize = s.finalize ? 1 : 0;
    out->count = s.count;
    if (s.sendPeer != -1 || s.recvPeer != -1) return invalidArgument("{}: a peer-memory step names a message's peer", where_);
    if (s.kind == StepKind::Meet) {
      if (s.src.valid() || s.dst.valid() || s.count != 0) return invalidArgument("{}: a Meet moves no data", where_);
      return Status::Ok();
    }
    if (s.count == 0) return invalidArgument("{}: empty step", where_);
    if (s.count > std::numeric_limits<uint64_t>::max() / elemSize_)
      return invalidArgument("{}: {} elements overflow a byte count", where_, s.count);
    const uint64_t bytes = s.count * elemSize_;
    auto rankOf = [&](const BufRef& ref, bool every, int8_t* rank) -> Status {
      if (ref.rank == kOwnRank || (ref.rank >= 0 && ref.rank < plan_.nranks) || (every && ref.rank == kEveryRank)) {
        *rank = static_cast<int8_t>(ref.rank);
        return Status::Ok();
      }
      return invalidArgument("{}: names rank {} of {}", where_, ref.rank, plan_.nranks);
    };
    if (s.kind == StepKind::ReduceRanks && s.src.rank != kEveryRank)
      return invalidArgument("{}: ReduceRanks reads every rank's source", where_);
    if (s.kind == StepKind::Reduce) return invalidArgument("{}: a Reduce over a peer's buffer", where_);
    LOOM_TRY(rankOf(s.src, s.kind == StepKind::ReduceRanks, &out->srcRank));
    LOOM_TRY(rankOf(s.dst, true, &out->dstRank));
    for (const BufRef* ref : {&s.src, &s.dst}) {
      if (!ref->valid() || ref->buffer >= kInlineBuffers)
        return invalidArgument("{}: buffer {} is not one a board carries", where_, ref->buffer);
      if (ref->offset > (std::numeric_limits<uint64_t>::max() - bytes) / elemSize_)
        return invalidArgument("{}: offset {} overflows", where_, ref->offset);
    }
    // This rank's own part must be bound, as any step's (a peer's is checked by the peer's encoder).
    const char* at = nullptr;
    if (s.src.own() || s.src.rank == plan_.rank || s.src.rank == kEveryRank) LOOM_TRY(buffer(s.src, bytes, "source", &at));
    if (s.dst.own() || s.dst.rank == plan_.rank || s.dst.rank == kEveryRank) LOOM_TRY(buffer(s.dst, bytes, "destination", &at));
    out->srcBuffer = s.src.buffer;
    out->srcOffset = s.src.offset;
    out->dstBuffer = s.dst.buffer;
    out->dstOffset = s.dst.offset;
    out->hasDst = 1;
    return Status::Ok();
  }

  Status fifo(uint32_t laneIndex, int32_t peer, uint32_t channel, uint64_t bytes, bool send, int32_t* index) {
    const char* dir = send ? "send to" : "receive from";
    if (peer < 0 || peer >= plan_.nranks || peer == plan_.rank)
      return invalidArgument("{}: cannot {} rank {} (rank {} of {})", where_, dir, peer, plan_.rank, plan_.nranks);
    const size_t i = static_cast<size_t>(peer) * b_.nchannels + channel;
    const DeviceFifo& f = (send ? b_.sends : b_.recvs)[i];
    if (!f.present())
      return invalidArgument("{}: no FIFO bound to {} rank {} on channel {}", where_, dir, peer, channel);
    auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % alignof(uint64_t) == 0; };
    if (!aligned(f.tail) || !aligned(f.head) || !aligned(f.sizes) || !aligned(f.posts))
      return invalidArgument("{}: the FIFO to {} rank {} on channel {} has a misaligned counter", where_, dir, peer,
                             channel);
    if (bytes > f.slotBytes)
      return invalidArgument(
          "{}: a message of {} bytes does not fit the {}-byte slots of the FIFO to {} rank {} on channel {}; "
          "build the plan with chunkElems <= {}",
          where_, bytes, f.slotBytes, dir, peer, channel, f.slotBytes / elemSize_);
    // One lane per FIFO end (plan.h promises it): a lane reads its own counter back to find its next
    // slot, so two lanes on one end would take the same slot.
    std::vector<int>& owner = send ? sendOwner_ : recvOwner_;
    if (owner[i] >= 0 && owner[i] != static_cast<int>(laneIndex))
      return invalidArgument("{}: lanes {} and {} both {} rank {} on channel {}", where_, owner[i], laneIndex, dir,
                             peer, channel);
    owner[i] = static_cast<int>(laneIndex);
    *index = static_cast<int32_t>(i);
    return Status::Ok();
  }

  Status buffer(const BufRef& ref, uint64_t bytes, const char* what, const char** at) {
    if (!ref.valid() || ref.buffer >= b_.buffers.size() || !b_.buffers[ref.buffer])
      return invalidArgument("{}: {} buffer {} is not bound", where_, what, ref.buffer);
    if (ref.offset > (std::numeric_limits<uint64_t>::max() - bytes) / elemSize_)
      return invalidArgument("{}: {} offset {} overflows", where_, what, ref.offset);
    *at = b_.buffers[ref.buffer] + ref.offset * elemSize_;
    return Status::Ok();
  }

  const Plan& plan_;
  const DevicePlanBindings& b_;
  size_t elemSize_;
  std::vector<int> sendOwner_, recvOwner_;
  std::string where_;
};

Status checkBindings(const Plan& plan, const DevicePlanBindings& b) {
  if (dataTypeSize(b.dtype) == 0) return invalidArgument("device plan: unknown dtype {}", static_cast<int>(b.dtype));
  if (plan.nranks < 1 || plan.rank < 0 || plan.rank >= plan.nranks)
    return invalidArgument("device plan: rank {} of {}", plan.rank, plan.nranks);
  if (b.nchannels < 1) return invalidArgument("device plan: the FIFO tables need at least one channel");
  const size_t fifos = static_cast<size_t>(plan.nranks) * b.nchannels;
  if (b.sends.size() != fifos || b.recvs.size() != fifos)
    return invalidArgument("device plan: FIFO tables of {} and {} entries, expected {} ({} ranks x {} channels)",
                           b.sends.size(), b.recvs.size(), fifos, plan.nranks, b.nchannels);
  for (size_t l = 0; l < plan.lanes.size(); ++l)
    if (plan.lanes[l].channel >= b.nchannels)
      return invalidArgument("device plan: lane {} uses channel {}, the FIFO tables have {}", l, plan.lanes[l].channel,
                             b.nchannels);
  if (plan.lanes.size() > std::numeric_limits<uint32_t>::max() ||
      stepCount(plan) > std::numeric_limits<uint32_t>::max() || fifos > std::numeric_limits<int32_t>::max())
    return invalidArgument("device plan: too many lanes, steps or FIFOs");
  return Status::Ok();
}

const char* outcomeText(DeviceLaneOutcome outcome) {
  switch (outcome) {
    case DeviceLaneOutcome::NotReported: return "did not report (its launch failed or has not finished)";
    case DeviceLaneOutcome::Done: return "done";
    case DeviceLaneOutcome::Aborted: return "aborted while waiting";
    case DeviceLaneOutcome::TimedOut: return "no progress within the timeout";
    case DeviceLaneOutcome::SizeMismatch: return "the message has another size: the ranks run different operations";
    case DeviceLaneOutcome::WrongElementSize: return "the kernel's dtype is not the encoded plan's";
    case DeviceLaneOutcome::OutsideWindows:
      return "that rank's buffer lies in none of its windows registered with the communicator (ranks in other "
             "processes read each other's buffers only in windows: every rank passes buffers of its windows, or none does)";
  }
  return "unknown outcome";
}

loomResult_t outcomeCode(DeviceLaneOutcome outcome) {
  switch (outcome) {
    case DeviceLaneOutcome::Aborted: return loomRemoteError;
    case DeviceLaneOutcome::TimedOut: return loomTimeout;
    case DeviceLaneOutcome::SizeMismatch:
    case DeviceLaneOutcome::OutsideWindows: return loomInvalidUsage;
    default: return loomInternalError;
  }
}

Status laneFailure(const Plan& plan, size_t l, const DeviceLaneStatus& st) {
  const auto outcome = static_cast<DeviceLaneOutcome>(st.outcome);
  const Lane& lane = plan.lanes[l];
  std::string where = fmt::format("{} {} on the device, rank {}: lane {} (channel {}) step {}/{}", plan.algorithm,
                                  collectiveName(plan.coll), plan.rank, l, lane.channel, st.step, lane.steps.size());
  if (st.step < lane.steps.size()) where += fmt::format(" ({})", stepKindName(lane.steps[st.step].kind));
  if (st.peer >= 0 && outcome == DeviceLaneOutcome::OutsideWindows)
    where += fmt::format(" reading rank {}'s buffers", st.peer);
  else if (st.peer >= 0)
    where += fmt::format(" waiting on rank {}", st.peer);
  if (outcome == DeviceLaneOutcome::SizeMismatch)
    return Status(outcomeCode(outcome),
                  fmt::format("{}: {} bytes arrived: {}", where, st.detail, outcomeText(outcome)));
  if (outcome == DeviceLaneOutcome::Done)
    return internalError("{}: reported done after {} of {} steps", where, st.step, lane.steps.size());
  return Status(outcomeCode(outcome), fmt::format("{}: {}", where, outcomeText(outcome)));
}

}  // namespace

size_t devicePlanBytes(const Plan& plan, const DevicePlanBindings& bindings) { return layoutOf(plan, bindings).total; }

Status encodeDevicePlan(const Plan& plan, const DevicePlanBindings& b, std::span<std::byte> out,
                        DevicePlanShape* shape) {
  LOOM_TRY(checkBindings(plan, b));
  const Layout l = layoutOf(plan, b);
  if (out.size() < l.total) return invalidArgument("device plan: needs {} bytes, got {}", l.total, out.size());
  if (reinterpret_cast<uintptr_t>(out.data()) % kTableAlign != 0)
    return invalidArgument("device plan: the output must be {}-byte aligned", kTableAlign);

  const size_t elemSize = dataTypeSize(b.dtype);
  std::vector<DeviceLane> lanes(plan.lanes.size());
  std::vector<DeviceStep> steps;
  steps.reserve(stepCount(plan));
  Encoder encoder(plan, b, elemSize);
  for (uint32_t li = 0; li < plan.lanes.size(); ++li) {
    lanes[li].channel = plan.lanes[li].channel;
    lanes[li].firstStep = static_cast<uint32_t>(steps.size());
    lanes[li].stepCount = static_cast<uint32_t>(plan.lanes[li].steps.size());
    for (uint32_t si = 0; si < plan.lanes[li].steps.size(); ++si) {
      DeviceStep step;
      LOOM_TRY(encoder.step(li, si, &step)
                   .withContext(fmt::format("device plan of rank {} ({} {})", plan.rank, plan.algorithm,
                                            collectiveName(plan.coll))));
      steps.push_back(step);
    }
  }

  DevicePlanHeader h;
  h.rank = plan.rank;
  h.nranks = plan.nranks;
  h.nchannels = b.nchannels;
  h.nlanes = static_cast<uint32_t>(lanes.size());
  h.nsteps = static_cast<uint32_t>(steps.size());
  h.nbuffers = static_cast<uint32_t>(b.buffers.size());
  h.elemSize = static_cast<uint32_t>(elemSize);
  h.dtype = b.dtype;
  h.profile = b.profile ? 1 : 0;
  h.timeoutNs = b.timeoutNs;
  h.abort = b.abort;
  h.laneOffset = l.lanes;
  h.stepOffset = l.steps;
  h.sendFifoOffset = l.sends;
  h.recvFifoOffset = l.recvs;
  h.totalBytes = l.total;
  if (l.boards != 0) {
    h.boardOffset = l.boards;
    h.boardChannels = b.boardChannels;
    h.boardScope = b.boardScope;
    h.windows = b.windows;
  }

  std::byte* base = out.data();
  std::memset(base, 0, l.total);
  std::memcpy(base, &h, sizeof h);
  if (!lanes.empty()) std::memcpy(base + l.lanes, lanes.data(), lanes.size() * sizeof(DeviceLane));
  if (!steps.empty()) std::memcpy(base + l.steps, steps.data(), steps.size() * sizeof(DeviceStep));
  std::memcpy(base + l.sends, b.sends.data(), b.sends.size() * sizeof(DeviceFifo));
  std::memcpy(base + l.recvs, b.recvs.data(), b.recvs.size() * sizeof(DeviceFifo));
  if (l.boards != 0) std::memcpy(base + l.boards, b.boards.data(), b.boards.size() * sizeof(DevicePeerBoard*));
  shape->lanes = h.nlanes;
  shape->bytes = l.total;
  return Status::Ok();
}

Status bindDevicePlanCall(const Plan& plan, const DevicePlanBindings& b, char* const* bufferTable,
                          DevicePlanCall* call) {
  *call = DevicePlanCall{};
  if (!plan.lanes.empty() && !b.laneStatus) return invalidArgument("device plan: no lane status to report into");
  if (b.buffers.size() <= kInlineBuffers) {
    for (size_t i = 0; i < b.buffers.size(); ++i) call->buffers[i] = b.buffers[i];
  } else if (!bufferTable) {
    return invalidArgument("device plan: {} buffers need a buffer table (at most {} fit the call)", b.buffers.size(),
                           kInlineBuffers);
  } else {
    call->bufferTable = bufferTable;
  }
  call->laneStatus = b.laneStatus;
  call->op = b.op;
  return Status::Ok();
}

void layoutDevicePlanSequence(std::span<const size_t> planBytes, DevicePlanSequenceLayout* out) {
  DevicePlanSequenceLayout& l = *out;
  l.offsets.clear();
  size_t at = alignUp(sizeof(DevicePlanSequence) + planBytes.size() * sizeof(uint64_t));
  for (size_t bytes : planBytes) {
    l.offsets.push_back(at);
    at = alignUp(at + bytes);
  }
  l.total = at;
}

DevicePlanSequenceLayout layoutDevicePlanSequence(std::span<const size_t> planBytes) {
  DevicePlanSequenceLayout l;
  layoutDevicePlanSequence(planBytes, &l);
  return l;
}

void writeDevicePlanSequenceHeader(const DevicePlanSequenceLayout& layout, uint32_t blocks, std::span<std::byte> out) {
  DevicePlanSequence seq;
  seq.nplans = static_cast<uint32_t>(layout.offsets.size());
  seq.blocks = blocks;
  std::memcpy(out.data(), &seq, sizeof seq);
  for (size_t k = 0; k < layout.offsets.size(); ++k) {
    const uint64_t offset = layout.offsets[k];
    std::memcpy(out.data() + sizeof seq + k * sizeof offset, &offset, sizeof offset);
  }
}

Status devicePlanResult(const Plan& plan, std::span<const DeviceLaneStatus> statuses) {
  if (statuses.size() < plan.lanes.size())
    return internalError("device plan: {} lane statuses for {} lanes", statuses.size(), plan.lanes.size());
  // The cause, not its echo: a failed lane aborts the others, and in a sequence the blocks of a plan
  // that meet an abort before starting it never report. So a lane that failed by itself comes first,
  // then an abort, and a lane that never reported only when no lane said anything.
  auto rank = [](DeviceLaneOutcome o) {
    return o == DeviceLaneOutcome::NotReported ? 1 : o == DeviceLaneOutcome::Aborted ? 2 : 3;
  };
  const size_t none = plan.lanes.size();
  size_t failed = none;
  for (size_t l = 0; l < plan.lanes.size(); ++l) {
    const auto outcome = static_cast<DeviceLaneOutcome>(statuses[l].outcome);
    if (outcome == DeviceLaneOutcome::Done && statuses[l].step == plan.lanes[l].steps.size()) continue;
    if (failed == none || rank(outcome) > rank(static_cast<DeviceLaneOutcome>(statuses[failed].outcome))) failed = l;
  }
  return failed == none ? Status::Ok() : laneFailure(plan, failed, statuses[failed]);
}

}  // namespace loom::device
