// The plan interpreter: runs one lane of an encoded plan (device_plan_layout.h, made by device/plan_encoder.h)
// step by step over FIFOs in peer-visible memory. Written once, as __host__ __device__ code, for a
// Platform policy that supplies what differs between a GPU block and a host thread:
//
//   uint32_t worker(), workers()          this worker and how many split the lane's elementwise work
//   void barrier()                        all of the lane's workers
//   uint64_t loadAcquire(const uint64_t*, FifoScope), loadRelaxed(const uint64_t*, FifoScope)
//   void storeRelease(uint64_t*, uint64_t, FifoScope), storeRelaxed(uint64_t*, uint64_t, FifoScope)
//   bool compareExchange(uint64_t*, uint64_t expected, uint64_t desired, FifoScope)   (acq_rel; posts)
//   uint64_t fetchAdd(uint64_t*, uint64_t, FifoScope)
//   void storeReleaseBoth(uint64_t* a, uint64_t va, uint64_t* b, uint64_t vb, FifoScope)
//                                         two release stores, which a GPU makes with one fence
//                                         FIFO counters and size words, at the FIFO's scope (system, or
//                                         the GPU's when both ends run on it: device_plan_layout.h)
//   uint32_t loadFlag(const uint32_t*); void raiseFlag(uint32_t*)   the abort word
//   void noteWaiting(uint32_t*, uint32_t)  a relaxed store the host reads (DeviceLaneStatus::waitingOn)
//   uint64_t nowNs(); void pause(uint32_t round)                    a polite, bounded wait
//   LaneShared& shared()                  one per lane, seen by all its workers
//
// plan_kernel.cu's policy is a thread block (threadIdx, __syncthreads, cuda::atomic_ref at system
// scope, __nanosleep); host_lane_platform.h's is one or more host threads (std::atomic_ref,
// std::barrier, yield), which is how the tests run this very code without a GPU.
//
// Step semantics are core/run/executor.cc's, and every copy and reduction goes through element_ops.cuh's
// elementwiseThread, so results match the host executor's bit for bit. Only worker 0 waits on and
// publishes counters; barriers make the slot visible to all workers before they touch it and make
// their writes complete before it is handed on.
//
// What a step costs beyond its data is the handshake (docs/PERFORMANCE.md, "GPU"), so worker 0 keeps it
// lean: it remembers the counters it last saw (a sender with slots known to be free reads nothing; a
// receiver whose message was already counted waits for nothing), polls relaxed and acquires once when
// the counter is there, fences at the FIFO's scope, and each worker keeps kPlanUnroll vectors in flight;
// a reduction whose result also goes on to the next rank writes both in one pass.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_plan_layout.h"
#include "kernels/cuda/element_ops.cuh"
#include "kernels/cuda/rank_pass.cuh"

#if defined(__CUDACC__)
// One copy of the elementwise loops per element type, called from every step kind, instead of one
// inlined copy per call site (code size and the 3-target compile time).
#define LOOM_HD_NOINLINE __host__ __device__ __noinline__
#else
#define LOOM_HD_NOINLINE inline
#endif

namespace loom::cuda {

// Worker 0's memory of the counters it last acquired, across a lane's steps (a lane's steps use a few
// FIFOs again and again): a FIFO's head (slots its receiver freed) and tail (messages its sender
// counted). Counters only grow and each value was acquired, so a remembered value that already
// satisfies a wait orders this step after the peer's side exactly as a fresh read would.
struct SeenCounters {
  static constexpr uint32_t kEntries = 4;  // direct-mapped by FIFO index
  int32_t sendFifo[kEntries], recvFifo[kEntries];
  uint64_t head[kEntries], tail[kEntries];
  LOOM_HD void forget() {
    for (uint32_t i = 0; i < kEntries; ++i) sendFifo[i] = recvFifo[i] = -1;
  }
  // The value remembered for FIFO `fifo` of this table, or 0 (nothing yet, which satisfies no wait
  // that could block).
  LOOM_HD static uint64_t of(const int32_t* fifos, const uint64_t* values, int32_t fifo) {
    const uint32_t i = static_cast<uint32_t>(fifo) % kEntries;
    return fifos[i] == fifo ? values[i] : 0;
  }
  LOOM_HD static void note(int32_t* fifos, uint64_t* values, int32_t fifo, uint64_t v) {
    const uint32_t i = static_cast<uint32_t>(fifo) % kEntries;
    fifos[i] = fifo;
    values[i] = v;
  }
};

// What worker 0 hands to the other workers of its lane between two barriers.
struct LaneShared {
  char* sendSlot;          // where the outgoing message goes: a slot, the receiver's posted destination, or lowLatencyOut
  const char* recvSlot;    // the incoming message's slot, lowLatencyIn, or null when it was written into dst directly
  uint32_t outcome;        // DeviceLaneOutcome: Done means "go on"
  uint64_t lowLatencyStop;  // DeviceLaneOutcome a worker polling low-latency words gave up with (0: none)
  uint64_t sendSeq, recvSeq;  // the step's message numbers (worker 0's claim), for the low-latency words
  // A low-latency message's data on this side of the words: unpacked after it arrived, or to be packed.
  alignas(16) char lowLatencyIn[kLowLatencyBytes];
  alignas(16) char lowLatencyOut[kLowLatencyBytes];
  // Worker 0's alone, kept here rather than in its registers, where arrays indexed at run time would
  // go to local memory.
  SeenCounters seen;
  // A profiled lane's figures so far and its clock's last reading (worker 0's; here, not in registers,
  // so that a lane not profiled pays for none of it).
  DeviceLaneProfile profile;
  uint64_t profileClock, profileStart;
  uint32_t* waitingOnWord;  // this lane's DeviceLaneStatus::waitingOn (worker 0 writes it)
  // Peer-memory plans: the Meets this lane passed in this plan, every rank's buffers (read at the
  // first; this rank's own too), and the pass worker 0 set up for the step's workers.
  uint32_t meetsPassed;
  char* rankBuffers[kMaxPeerRanks][kInlineBuffers];
  RankPassArgs pass;
};

// Worker 0 of a profiled lane: the time since its last reading goes to `part`.
template <class P>
LOOM_HD void profileMark(P& p, LaneShared& sh, uint64_t* part) {
  const uint64_t now = p.nowNs();
  *part += now - sh.profileClock;
  sh.profileClock = now;
}

// The encoded plan, read in place, with what this call binds (its buffers, operator, lane statuses).
class DevicePlanView {
 public:
  LOOM_HD DevicePlanView(const void* encoded, const DevicePlanCall& call)
      : base_(static_cast<const char*>(encoded)), h_(static_cast<const DevicePlanHeader*>(encoded)), call_(call) {}
  LOOM_HD const DevicePlanHeader& header() const { return *h_; }
  LOOM_HD const DevicePlanCall& call() const { return call_; }
  LOOM_HD const ReduceOp& op() const { return call_.op; }
  LOOM_HD const DeviceLane& lane(uint32_t i) const {
    return reinterpret_cast<const DeviceLane*>(base_ + h_->laneOffset)[i];
  }
  LOOM_HD const DeviceStep& step(uint32_t i) const {
    return reinterpret_cast<const DeviceStep*>(base_ + h_->stepOffset)[i];
  }
  LOOM_HD char* at(uint32_t buffer, uint64_t offset) const {
    char* const base = call_.bufferTable ? call_.bufferTable[buffer] : call_.buffers[buffer];
    return base + offset * h_->elemSize;
  }
  LOOM_HD const DeviceFifo& sendFifo(int32_t i) const {
    return reinterpret_cast<const DeviceFifo*>(base_ + h_->sendFifoOffset)[i];
  }
  LOOM_HD const DeviceFifo& recvFifo(int32_t i) const {
    return reinterpret_cast<const DeviceFifo*>(base_ + h_->recvFifoOffset)[i];
  }
  // Rank `rank`'s board of `channel` (peer-memory plans), where this rank sees it.
  LOOM_HD DevicePeerBoard* board(int32_t rank, uint32_t channel) const {
    return reinterpret_cast<DevicePeerBoard* const*>(base_ + h_->boardOffset)[rank] + channel;
  }

 private:
  const char* base_;
  const DevicePlanHeader* h_;
  const DevicePlanCall& call_;
};

// 16-byte vectors each worker has in flight per source (element_ops.cuh): a plan kernel's block has its
// SM to itself, and with 512 threads 4 vectors per source still fit its registers (docs/PERFORMANCE.md
// records the counts ptxas gives).
inline constexpr size_t kPlanUnroll = 4;

// dst = a (op) b, or dst = a when b is null, and the same into dst2 when it is set; the post-operation
// only when finalizing.
template <class E>
LOOM_HD_NOINLINE void elementwisePass(void* dst, void* dst2, const void* a, const void* b, uint64_t count,
                                      const ReduceOp& op, bool finalize, uint32_t worker, uint32_t workers) {
  const ElementwiseArgs args = makeArgs(dst, a, b, count, sizeof(typename E::Storage), op, finalize, dst2);
  elementwiseThread<E, kPlanUnroll>(args, worker, workers);
}
template <class E>
LOOM_HD void elementwisePass(void* dst, const void* a, const void* b, uint64_t count, const ReduceOp& op,
                             bool finalize, uint32_t worker, uint32_t workers) {
  elementwisePass<E>(dst, nullptr, a, b, count, op, finalize, worker, workers);
}

// Whether two buffers sit at the same offset within 16-byte vectors: one pass can then store both with
// whole vectors (otherwise everything would go element by element).
LOOM_HD bool sameVectorPhase(const void* x, const void* y) {
  return reinterpret_cast<uintptr_t>(x) % kVectorBytes == reinterpret_cast<uintptr_t>(y) % kVectorBytes;
}

// How often (in wait rounds) a waiting lane looks at the abort word and the clock. The abort word is
// in mapped host memory, so each look is a read across PCIe (about a microsecond) that would otherwise
// slow every round of every waiting lane; an abort is then noticed within a few tens of microseconds.
inline constexpr uint32_t kAbortCheckRounds = 16;

// After this many rounds a wait counts as lasting: worker 0 says whom it waits on in its lane's status
// (DeviceLaneStatus::waitingOn; on a GPU some hundreds of microseconds, past the handshakes of a
// running collective), and takes it back when the wait ends. A relaxed store to pinned host memory,
// made only by waits that already lasted that long.
inline constexpr uint32_t kNoteWaitRounds = 256;

// Where a wait notes its peer once it lasts (null: nowhere).
struct WaitNote {
  uint32_t* word;
  int32_t peer;
};

// Waits until *counter >= target, polling with relaxed loads and acquiring once the value is there (an
// acquiring poll would invalidate the SM's L1 on every round). Done when it is, with the value seen in
// *seen; Aborted or TimedOut instead of waiting forever.
template <class P>
LOOM_HD DeviceLaneOutcome waitAtLeast(P& p, const DevicePlanHeader& h, const uint64_t* counter, FifoScope scope,
                                      uint64_t target, uint64_t* seen, WaitNote note = WaitNote{nullptr, -1}) {
  uint64_t v = p.loadAcquire(counter, scope);
  if (v < target) {
    const uint64_t start = p.nowNs();
    uint32_t round = 0;
    for (;; ++round) {
      p.pause(round);
      if (p.loadRelaxed(counter, scope) >= target) break;
      if (round == kNoteWaitRounds && note.word) p.noteWaiting(note.word, static_cast<uint32_t>(note.peer + 1));
      if (round % kAbortCheckRounds != kAbortCheckRounds - 1) continue;
      if (h.abort && p.loadFlag(h.abort) != 0) return DeviceLaneOutcome::Aborted;
      if (h.timeoutNs != 0 && p.nowNs() - start > h.timeoutNs) return DeviceLaneOutcome::TimedOut;
    }
    if (round >= kNoteWaitRounds && note.word) p.noteWaiting(note.word, 0);
    v = p.loadAcquire(counter, scope);  // counters only grow: still >= target
  }
  *seen = v;
  return DeviceLaneOutcome::Done;
}

// Waits until the counter of FIFO `fifo` (head or tail, as `fifos`/`values` say) reaches `target`,
// reading nothing when the value remembered in `seen` already does.
template <class P>
LOOM_HD DeviceLaneOutcome waitCounted(P& p, const DevicePlanHeader& h, const uint64_t* counter, FifoScope scope,
                                      uint64_t target, int32_t* fifos, uint64_t* values, int32_t fifo,
                                      WaitNote note) {
  if (target == 0 || SeenCounters::of(fifos, values, fifo) >= target) return DeviceLaneOutcome::Done;
  uint64_t seen = 0;
  const DeviceLaneOutcome o = waitAtLeast(p, h, counter, scope, target, &seen, note);
  if (o == DeviceLaneOutcome::Done) SeenCounters::note(fifos, values, fifo, seen);
  return o;
}

// The scope that covers both: system unless both are the GPU's.
LOOM_HD FifoScope widerScope(FifoScope a, FifoScope b) {
  return a == FifoScope::Gpu && b == FifoScope::Gpu ? FifoScope::Gpu : FifoScope::System;
}

// Worker 0's side of a step: the message positions it claimed, and what it waited on if that failed.
struct StepClaim {
  uint64_t sendSeq = 0;
  uint64_t recvSeq = 0;
  bool sendDirect = false;  // the message goes to the receiver's post, not to the slot
  int32_t peer = -1;
  uint64_t detail = 0;
};

// Worker 0, when its lane stops at step `s` after posting dst (DeviceDirectPost): takes the post back,
// so that no sender writes into dst once this lane (and maybe the operation, and the caller's buffer)
// is gone. True when a sender took it first: it is writing now and publishes without waiting on
// anything, so the message is waited for and is in dst when this returns.
template <class P>
LOOM_HD bool withdrawPost(P& p, const DevicePlanView& plan, const DeviceStep& s, uint64_t recvSeq) {
  if (!s.postsDst) return false;
  const DeviceFifo& f = plan.recvFifo(s.recvFifo);
  if (p.compareExchange(&f.posts[recvSeq % f.nslots].seq, recvSeq + 1, 0, f.scope)) return false;  // a late sender uses the slot
  for (uint32_t round = 0; p.loadAcquire(f.tail, f.scope) < recvSeq + 1; ++round) p.pause(round);
  return true;
}

// Worker 0: posts where the incoming message may go directly, waits for a free slot in the send FIFO
// (first, as the executor asks) and for the message in the receive FIFO, checks the message's size,
// and last (as late as it can, for the receiver to have posted) decides where the outgoing one goes.
template <class P>
LOOM_HD DeviceLaneOutcome claimSlots(P& p, const DevicePlanView& plan, const DeviceStep& s, uint64_t bytes,
                                     LaneShared& sh, StepClaim& claim, SeenCounters& seen) {
  const DevicePlanHeader& h = plan.header();
  if (s.recvFifo >= 0) {
    const DeviceFifo& f = plan.recvFifo(s.recvFifo);
    claim.recvSeq = p.loadRelaxed(f.head, f.scope);  // this lane alone writes it
  }
  if (s.postsDst) {
    // Every step before this one is done (the barrier that ended it), so dst may be written from now on.
    const DeviceFifo& f = plan.recvFifo(s.recvFifo);
    DeviceDirectPost& post = f.posts[claim.recvSeq % f.nslots];
    p.storeRelaxed(&post.address, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(plan.at(s.dstBuffer, s.dstOffset))),
                   f.scope);
    p.storeRelaxed(&post.bytes, bytes, f.scope);
    p.storeRelease(&post.seq, claim.recvSeq + 1, f.scope);
  }
  if (s.sendFifo >= 0) {
    const DeviceFifo& f = plan.sendFifo(s.sendFifo);
    claim.sendSeq = p.loadRelaxed(f.tail, f.scope);  // this lane is the only writer of its tail
    const uint64_t freedAtLeast = claim.sendSeq + 1 > f.nslots ? claim.sendSeq + 1 - f.nslots : 0;
    const DeviceLaneOutcome o = waitCounted(p, h, f.head, f.scope, freedAtLeast, seen.sendFifo, seen.head, s.sendFifo,
                                            WaitNote{sh.waitingOnWord, s.sendPeer});
    if (o != DeviceLaneOutcome::Done) {
      withdrawPost(p, plan, s, claim.recvSeq);
      claim.peer = s.sendPeer;
      return o;
    }
  }
  if (s.recvFifo >= 0 && s.recvLowLatency) {
    // The words themselves say when they came: every worker polls its own (receiveLowLatency).
    sh.recvSlot = sh.lowLatencyIn;
    sh.recvSeq = claim.recvSeq;
    p.storeRelaxed(&sh.lowLatencyStop, 0, FifoScope::Gpu);
  } else if (s.recvFifo >= 0) {
    const DeviceFifo& f = plan.recvFifo(s.recvFifo);
    DeviceLaneOutcome o = waitCounted(p, h, f.tail, f.scope, claim.recvSeq + 1, seen.recvFifo, seen.tail, s.recvFifo,
                                      WaitNote{sh.waitingOnWord, s.recvPeer});
    if (o != DeviceLaneOutcome::Done && withdrawPost(p, plan, s, claim.recvSeq)) o = DeviceLaneOutcome::Done;  // it landed
    if (o != DeviceLaneOutcome::Done) {
      claim.peer = s.recvPeer;
      return o;
    }
    const uint64_t word = p.loadRelaxed(f.sizes + claim.recvSeq % f.nslots, f.scope);  // published by the tail's release
    const uint64_t arrived = word & ~kDirectMessage;
    if (arrived != bytes) {
      claim.peer = s.recvPeer;
      claim.detail = arrived;
      return DeviceLaneOutcome::SizeMismatch;
    }
    // A direct message is in dst already (the sender wrote only where this step posted, checked above).
    sh.recvSlot = (word & kDirectMessage) ? nullptr : f.slots + (claim.recvSeq % f.nslots) * f.slotBytes;
  }
  if (s.sendFifo >= 0 && s.sendLowLatency) {
    sh.sendSlot = sh.lowLatencyOut;  // packed into words after the data is ready (sendLowLatency)
    sh.sendSeq = claim.sendSeq;
  } else if (s.sendFifo >= 0) {
    const DeviceFifo& f = plan.sendFifo(s.sendFifo);
    sh.sendSlot = f.slots + (claim.sendSeq % f.nslots) * f.slotBytes;
    if (f.posts) {  // the receiver may already wait with its destination posted (DeviceDirectPost)
      DeviceDirectPost& post = f.posts[claim.sendSeq % f.nslots];
      // Taken, not only read: a receiver that stops meanwhile then waits for these bytes instead of
      // leaving with them still to land in its memory (withdrawPost).
      if (p.loadAcquire(&post.seq, f.scope) == claim.sendSeq + 1 && p.loadRelaxed(&post.bytes, f.scope) == bytes &&
          p.compareExchange(&post.seq, claim.sendSeq + 1, (claim.sendSeq + 1) | kPostTaken, f.scope)) {
        sh.sendSlot = reinterpret_cast<char*>(static_cast<uintptr_t>(p.loadRelaxed(&post.address, f.scope)));
        claim.sendDirect = true;
      }
    }
  }
  return DeviceLaneOutcome::Done;
}

// Where this rank reaches `address`, as rank q published it, through q's windows: false when no window
// of q holds it. A linear search: it runs once per peer and buffer at a plan's first Meet, over the
// few windows a job registers.
LOOM_HD bool windowView(const DeviceWindowTable& table, int32_t q, uint64_t address, uint64_t* here) {
  const uint32_t used = table.slotsUsed < kMaxWindows ? table.slotsUsed : kMaxWindows;
  for (uint32_t w = 0; w < used; ++w) {
    const DeviceWindowView& v = table.views[w][q];
    if (v.owner != 0 && address >= v.owner && address - v.owner < v.bytes) {
      *here = v.local + (address - v.owner);
      return true;
    }
  }
  return false;
}

// Worker 0 at a Meet of a peer-memory plan: counts this lane's arrival on its board (the first Meet of
// the plan publishes the call's buffers with it), waits until every peer's lane of the channel arrived
// as often, and at the first Meet reads every peer's buffers. A wait that fails names the peer.
template <class P>
LOOM_HD DeviceLaneOutcome meetPeers(P& p, const DevicePlanView& plan, uint32_t channel, LaneShared& sh, StepClaim& claim) {
  const DevicePlanHeader& h = plan.header();
  const FifoScope scope = h.boardScope;
  const bool first = sh.meetsPassed == 0;
  DevicePeerBoard* mine = plan.board(h.rank, channel);
  if (first) {
    for (uint32_t b = 0; b < kInlineBuffers; ++b) {
      sh.rankBuffers[h.rank][b] = plan.call().buffers[b];
      p.storeRelaxed(&mine->buffers[b], static_cast<uint64_t>(reinterpret_cast<uintptr_t>(plan.call().buffers[b])), scope);
    }
  }
  const uint64_t arrivals = p.loadRelaxed(&mine->meets, scope) + 1;  // this lane alone writes it
  p.storeRelease(&mine->meets, arrivals, scope);
  for (int32_t q = 0; q < h.nranks; ++q) {
    if (q == h.rank) continue;
    DevicePeerBoard* theirs = plan.board(q, channel);
    uint64_t seen = 0;
    const DeviceLaneOutcome o = waitAtLeast(p, h, &theirs->meets, scope, arrivals, &seen, WaitNote{sh.waitingOnWord, q});
    if (o != DeviceLaneOutcome::Done) {
      claim.peer = q;
      return o;
    }
    if (first)
      for (uint32_t b = 0; b < kInlineBuffers; ++b) {
        const uint64_t published = p.loadRelaxed(&theirs->buffers[b], scope);
        uint64_t here = published;
        if (h.windows && b >= kPeerSharedBuffers) {
          here = 0;  // the peer's own (scratch): in no window, and never read here
        } else if (h.windows && published != 0 && !windowView(*h.windows, q, published, &here)) {
          claim.peer = q;
          return DeviceLaneOutcome::OutsideWindows;
        }
        sh.rankBuffers[q][b] = reinterpret_cast<char*>(static_cast<uintptr_t>(here));
      }
  }
  ++sh.meetsPassed;
  return DeviceLaneOutcome::Done;
}

// Worker 0, before a peer-memory data step (ReduceRanks, or a Copy naming a peer's buffer): the pass's
// sources and destinations (every rank's in rank order where the step says so). A copy's destination
// that is its source (in place, no post-operation) is left out.
LOOM_HD void preparePeerPass(const DevicePlanView& plan, const DeviceStep& s, LaneShared& sh) {
  const DevicePlanHeader& h = plan.header();
  RankPassArgs& a = sh.pass;
  auto at = [&](int32_t rank, uint32_t buffer, uint64_t offset) -> char* {
    return sh.rankBuffers[rank][buffer] + offset * h.elemSize;
  };
  auto rankOf = [&](int8_t r) { return r == kStepOwnRank ? h.rank : static_cast<int32_t>(r); };
  a.nsrc = 0;
  if (s.srcRank == kStepEveryRank) {
    for (int32_t q = 0; q < h.nranks; ++q) a.src[a.nsrc++] = at(q, s.srcBuffer, s.srcOffset);
  } else {
    a.src[a.nsrc++] = at(rankOf(s.srcRank), s.srcBuffer, s.srcOffset);
  }
  const bool plainCopy = s.kind == DeviceStepKind::Copy && !(s.finalize && plan.op().post != PostOpKind::None);
  a.ndst = 0;
  auto addDst = [&](char* d) {
    if (!(plainCopy && d == a.src[0])) a.dst[a.ndst++] = d;
  };
  if (s.dstRank == kStepEveryRank) {
    for (int32_t q = 0; q < h.nranks; ++q) addDst(at(q, s.dstBuffer, s.dstOffset));
  } else {
    addDst(at(rankOf(s.dstRank), s.dstBuffer, s.dstOffset));
  }
  planRankPass(&a, plan.op(), s.finalize != 0, s.count, h.elemSize);
}

LOOM_HD bool namesPeerMemory(const DeviceStep& s) {
  return s.kind == DeviceStepKind::ReduceRanks || s.srcRank != kStepOwnRank || s.dstRank != kStepOwnRank;
}

// The flag of low-latency words of message `seq` (never 0: the slots start zeroed).
LOOM_HD uint32_t lowLatencyFlag(uint64_t seq) { return static_cast<uint32_t>(seq + 1) == 0 ? 1u : static_cast<uint32_t>(seq + 1); }

// Every worker: polls its share of the incoming low-latency words until each carries the message's
// flag, and unpacks their data into lowLatencyIn. Worker 0 also watches the abort word and the clock;
// a worker that gives up says so in lowLatencyStop, which the others read while they wait. Returns
// the lane's outcome (the same on every worker: read after a barrier).
template <class P>
LOOM_HD DeviceLaneOutcome receiveLowLatency(P& p, const DevicePlanView& plan, const DeviceStep& s, uint64_t bytes,
                                            uint64_t seq, LaneShared& sh) {
  const DevicePlanHeader& h = plan.header();
  const DeviceFifo& f = plan.recvFifo(s.recvFifo);
  const uint64_t* words = reinterpret_cast<const uint64_t*>(f.lowLatencySlots + (seq % f.nslots) * kLowLatencySlotBytes);
  const uint32_t flag = lowLatencyFlag(seq);
  uint32_t* out = reinterpret_cast<uint32_t*>(sh.lowLatencyIn);
  const uint64_t n = (bytes + 3) / 4;
  const uint64_t start = p.nowNs();
  bool noted = false;  // worker 0 said whom it waits on (WaitNote)
  for (uint64_t i = p.worker(); i < n; i += p.workers()) {
    uint64_t w = p.loadRelaxed(words + i, f.scope);
    for (uint32_t round = 0; static_cast<uint32_t>(w >> 32) != flag; ++round) {
      p.pause(round);
      w = p.loadRelaxed(words + i, f.scope);
      if (round == kNoteWaitRounds && p.worker() == 0 && !noted) {
        p.noteWaiting(sh.waitingOnWord, static_cast<uint32_t>(s.recvPeer + 1));
        noted = true;
      }
      if (round % kAbortCheckRounds != kAbortCheckRounds - 1) continue;
      if (p.loadRelaxed(&sh.lowLatencyStop, FifoScope::Gpu) != 0) break;
      DeviceLaneOutcome stop = DeviceLaneOutcome::Done;
      if (p.worker() == 0 && h.abort && p.loadFlag(h.abort) != 0) stop = DeviceLaneOutcome::Aborted;
      if (h.timeoutNs != 0 && p.nowNs() - start > h.timeoutNs) stop = DeviceLaneOutcome::TimedOut;
      if (stop != DeviceLaneOutcome::Done) {
        p.storeRelaxed(&sh.lowLatencyStop, static_cast<uint64_t>(stop), FifoScope::Gpu);
        break;
      }
    }
    if (static_cast<uint32_t>(w >> 32) != flag) break;  // gave up
    out[i] = static_cast<uint32_t>(w);
  }
  if (noted) p.noteWaiting(sh.waitingOnWord, 0);
  p.barrier();
  const uint64_t stop = p.loadRelaxed(&sh.lowLatencyStop, FifoScope::Gpu);
  p.barrier();  // every worker read it before worker 0 may reset it at the next step
  return stop != 0 ? static_cast<DeviceLaneOutcome>(stop) : DeviceLaneOutcome::Done;
}

// Every worker: packs its share of lowLatencyOut's data into the outgoing slot's words, each stored at
// once with the message's flag (nothing else announces them).
template <class P>
LOOM_HD void sendLowLatency(P& p, const DevicePlanView& plan, const DeviceStep& s, uint64_t bytes, uint64_t seq,
                            const LaneShared& sh) {
  const DeviceFifo& f = plan.sendFifo(s.sendFifo);
  uint64_t* words = reinterpret_cast<uint64_t*>(f.lowLatencySlots + (seq % f.nslots) * kLowLatencySlotBytes);
  const uint64_t flag = static_cast<uint64_t>(lowLatencyFlag(seq)) << 32;
  const uint32_t* in = reinterpret_cast<const uint32_t*>(sh.lowLatencyOut);
  const uint64_t n = (bytes + 3) / 4;
  for (uint64_t i = p.worker(); i < n; i += p.workers()) p.storeRelaxed(words + i, flag | in[i], f.scope);
}

// Worker 0, after every worker finished the step's data: hands the sent message to the peer, then
// the received slot back to its sender (the executor's commitSend, then releaseRecv). A low-latency
// message needs no release: its words announce themselves; its tail still counts it (the sender reads
// its own tail for the next message's slot, the receiver a later message's).
template <class P>
LOOM_HD void publishStep(P& p, const DevicePlanView& plan, const DeviceStep& s, uint64_t bytes,
                         const StepClaim& claim) {
  uint64_t* tail = nullptr;  // released: the message is in its slot (or at the receiver's post)
  uint64_t* head = nullptr;  // released: this lane's reads of the incoming slot are done
  FifoScope scope = FifoScope::Gpu;
  if (s.sendFifo >= 0 && s.sendLowLatency) {
    const DeviceFifo& f = plan.sendFifo(s.sendFifo);
    p.storeRelaxed(f.tail, claim.sendSeq + 1, f.scope);  // the words announce themselves
  } else if (s.sendFifo >= 0) {
    const DeviceFifo& f = plan.sendFifo(s.sendFifo);
    p.storeRelaxed(f.sizes + claim.sendSeq % f.nslots, claim.sendDirect ? bytes | kDirectMessage : bytes, f.scope);
    tail = f.tail;
    scope = widerScope(scope, f.scope);
  }
  if (s.recvFifo >= 0) {
    const DeviceFifo& f = plan.recvFifo(s.recvFifo);
    head = f.head;
    scope = widerScope(scope, f.scope);
  }
  // One release for both (a step that receives and sends pays one fence, at the wider of the scopes).
  if (tail && head) {
    p.storeReleaseBoth(tail, claim.sendSeq + 1, head, claim.recvSeq + 1, scope);
  } else if (tail) {
    p.storeRelease(tail, claim.sendSeq + 1, scope);
  } else if (head) {
    p.storeRelease(head, claim.recvSeq + 1, scope);
  }
}

// Every worker: the step's copies and reductions (core/run/executor.cc's tryStep, case by case). `out`: a
// slot or the receiver's posted destination; `in`: the incoming slot, or null when the message came
// directly into dst.
template <class E, class P>
LOOM_HD void moveData(P& p, const DevicePlanView& plan, const DeviceStep& s, char* out, const char* in,
                      const LaneShared& sh) {
  const ReduceOp& op = plan.op();
  const uint32_t w = p.worker(), nw = p.workers();
  if (s.kind == DeviceStepKind::Meet) return;
  if (namesPeerMemory(s)) {  // worker 0 set the pass up (preparePeerPass)
    if (sh.pass.ndst > 0) rankPassThread<E, kPlanUnroll>(sh.pass, w, nw);
    return;
  }
  const bool fin = s.finalize != 0;
  char* dst = s.hasDst ? plan.at(s.dstBuffer, s.dstOffset) : nullptr;
  const char* src = s.srcBuffer != kNoDeviceBuffer ? plan.at(s.srcBuffer, s.srcOffset) : nullptr;
  switch (s.kind) {
    case DeviceStepKind::Send: elementwisePass<E>(out, src, nullptr, s.count, op, false, w, nw); break;
    case DeviceStepKind::Recv:
      if (in) elementwisePass<E>(dst, in, nullptr, s.count, op, false, w, nw);
      break;
    case DeviceStepKind::RecvReduce: elementwisePass<E>(dst, in, src, s.count, op, fin, w, nw); break;
    case DeviceStepKind::RecvReduceSend:
      if (dst && sameVectorPhase(dst, out)) {
        // One pass: the result goes into this rank's memory and on to the next rank as it is computed
        // (both stores take the one result, so they hold the same bits).
        elementwisePass<E>(dst, out, in, src, s.count, op, fin, w, nw);
      } else if (dst) {
        // Reduced into this rank's memory first, so that the copy out reads local memory, not the peer's.
        // The copy splits the elements by its own alignment: another worker may have written them.
        elementwisePass<E>(dst, in, src, s.count, op, fin, w, nw);
        p.barrier();
        elementwisePass<E>(out, dst, nullptr, s.count, op, false, w, nw);
      } else {
        elementwisePass<E>(out, in, src, s.count, op, fin, w, nw);
      }
      break;
    case DeviceStepKind::RecvCopySend:
      if (!in) {  // it came directly into dst (visible through the tail's acquire and the barrier): forward it
        elementwisePass<E>(out, dst, nullptr, s.count, op, false, w, nw);
        break;
      }
      elementwisePass<E>(out, in, nullptr, s.count, op, false, w, nw);
      if (dst) elementwisePass<E>(dst, in, nullptr, s.count, op, false, w, nw);
      break;
    case DeviceStepKind::Copy:
      // A copy onto itself is how in-place plans say "already there" (unless it finalizes).
      if ((fin && op.post != PostOpKind::None) || dst != src)
        elementwisePass<E>(dst, src, nullptr, s.count, op, fin, w, nw);
      break;
    case DeviceStepKind::Reduce:  // dst holds the running total and comes first (one-shot's bitwise order)
      elementwisePass<E>(dst, dst, src, s.count, op, fin, w, nw);
      break;
    case DeviceStepKind::Meet:
    case DeviceStepKind::ReduceRanks: break;  // above
  }
}

// Runs lane `laneIndex` of the encoded plan, bound by `call`, to its end or to its first failure, and
// reports how it ended in the call's lane status. Every worker of the lane calls it.
template <class E, class P>
LOOM_HD void runLane(const void* encoded, const DevicePlanCall& call, uint32_t laneIndex, P& p) {
  const DevicePlanView plan(encoded, call);
  const DevicePlanHeader& h = plan.header();
  if (laneIndex >= h.nlanes) return;  // a launch larger than the plan
  const DeviceLane& lane = plan.lane(laneIndex);
  LaneShared& sh = p.shared();
  StepClaim claim;  // worker 0's
  SeenCounters& seen = sh.seen;  // worker 0's
  if (p.worker() == 0) {
    seen.forget();
    sh.waitingOnWord = &call.laneStatus[laneIndex].waitingOn;
    sh.meetsPassed = 0;
  }
  // LOOM_DEVICE_PROFILE: worker 0 reads the clock around each part of a step (DeviceLaneProfile).
  const bool profile = h.profile != 0 && p.worker() == 0;
  if (profile) {
    sh.profile = DeviceLaneProfile{};
    sh.profileStart = sh.profileClock = p.nowNs();
  }
  DeviceLaneOutcome outcome =
      h.elemSize == sizeof(typename E::Storage) ? DeviceLaneOutcome::Done : DeviceLaneOutcome::WrongElementSize;
  uint32_t i = 0;
  for (; outcome == DeviceLaneOutcome::Done && i < lane.stepCount; ++i) {
    const DeviceStep& s = plan.step(lane.firstStep + i);
    const uint64_t bytes = s.count * h.elemSize;
    if (p.worker() == 0) {
      claim = StepClaim{};
      DeviceLaneOutcome o = DeviceLaneOutcome::Done;
      if (s.kind == DeviceStepKind::Meet) {
        o = meetPeers(p, plan, lane.channel, sh, claim);
      } else if (namesPeerMemory(s)) {
        preparePeerPass(plan, s, sh);
      } else {
        o = claimSlots(p, plan, s, bytes, sh, claim, seen);
      }
      sh.outcome = static_cast<uint32_t>(o);
      if (profile) profileMark(p, sh, &sh.profile.waitNs);
    }
    p.barrier();
    outcome = static_cast<DeviceLaneOutcome>(sh.outcome);
    if (outcome != DeviceLaneOutcome::Done) break;  // uniform: every worker read the same outcome
    // Read now: after the barrier that ends the step's data, worker 0 may already claim the next step.
    const uint64_t sendSeq = sh.sendSeq;
    if (s.recvLowLatency) {
      outcome = receiveLowLatency(p, plan, s, bytes, sh.recvSeq, sh);
      if (profile) profileMark(p, sh, &sh.profile.waitNs);
      if (outcome != DeviceLaneOutcome::Done) {
        claim.peer = s.recvPeer;  // worker 0's claim names whom it waited on
        break;
      }
    }
    moveData<E>(p, plan, s, sh.sendSlot, sh.recvSlot, sh);
    p.barrier();
    if (s.sendLowLatency) sendLowLatency(p, plan, s, bytes, sendSeq, sh);
    if (p.worker() == 0) {
      if (profile) profileMark(p, sh, &sh.profile.dataNs);
      publishStep(p, plan, s, bytes, claim);
      if (profile) {
        profileMark(p, sh, &sh.profile.publishNs);
        sh.profile.bytes += bytes;
      }
    }
  }
  if (p.worker() != 0) return;
  DeviceLaneStatus& st = call.laneStatus[laneIndex];
  if (profile) {
    sh.profile.laneNs = sh.profileClock - sh.profileStart;
    st.profile = sh.profile;
  }
  st.step = i;
  st.peer = outcome == DeviceLaneOutcome::Done ? -1 : claim.peer;
  st.detail = claim.detail;
  st.outcome = static_cast<uint32_t>(outcome);
  // A failed lane stops the rank's other lanes (and whoever else watches the word) at their next wait.
  if (outcome != DeviceLaneOutcome::Done && outcome != DeviceLaneOutcome::Aborted && h.abort) p.raiseFlag(h.abort);
}

// The encoded plan `k` of a sequence.
LOOM_HD const void* sequencePlan(const DevicePlanSequence* seq, uint32_t k) {
  const uint64_t* offsets = reinterpret_cast<const uint64_t*>(seq + 1);
  return reinterpret_cast<const char*>(seq) + offsets[k];
}

// Plan `k`'s call in a launch's arguments.
LOOM_HD const DevicePlanCall& launchCall(const DeviceLaunchArgs& args, uint32_t k) {
  return args.callTable ? args.callTable[k] : args.calls[k];
}

// Runs block `block`'s lane of every plan of the launch's sequence in order. Between two plans the
// blocks meet: each counts itself in `arrived` and waits for the others (every block of the launch is
// resident, plan_launch.h checks it); once any lane failed (its abort word is up) the remaining plans
// do not start and their lanes stay NotReported. After the last plan the block that counts itself last
// sets `arrived` back to 0 for the sequence's next launch. Every worker of the block calls it.
template <class E, class P>
LOOM_HD void runSequence(const DeviceLaunchArgs& args, uint32_t block, P& p) {
  auto* seq = static_cast<DevicePlanSequence*>(const_cast<void*>(args.sequence));
  for (uint32_t k = 0; k < seq->nplans; ++k) {
    const void* plan = sequencePlan(seq, k);
    if (k > 0) {
      const DevicePlanHeader& h = *static_cast<const DevicePlanHeader*>(plan);
      p.barrier();  // every worker is past its last read of the lane's shared state
      if (p.worker() == 0) {
        p.fetchAdd(&seq->arrived, 1, FifoScope::System);  // the encoding may be in pinned host memory
        // No timeout here: the blocks still in the previous plan end by themselves (their own waits
        // time out), while one that ended early may wait longer than a timeout as they make progress.
        const uint64_t all = static_cast<uint64_t>(k) * seq->blocks;
        auto aborted = [&] { return h.abort && p.loadFlag(h.abort) != 0; };
        for (uint32_t round = 0; p.loadAcquire(&seq->arrived, FifoScope::System) < all; ++round) {
          if (round % kAbortCheckRounds == kAbortCheckRounds - 1 && aborted()) break;
          p.pause(round);
        }
        p.shared().outcome = static_cast<uint32_t>(aborted() ? DeviceLaneOutcome::Aborted : DeviceLaneOutcome::Done);
      }
      p.barrier();
      const bool goOn = static_cast<DeviceLaneOutcome>(p.shared().outcome) == DeviceLaneOutcome::Done;
      p.barrier();  // every worker read it before worker 0 reuses the word for the plan's first step
      if (!goOn) return;
    }
    runLane<E>(plan, launchCall(args, k), block, p);
  }
  if (seq->nplans < 2) return;  // no meeting, nothing counted
  p.barrier();  // every worker is done with the sequence
  if (p.worker() == 0) {
    const uint64_t all = static_cast<uint64_t>(seq->nplans) * seq->blocks;
    if (p.fetchAdd(&seq->arrived, 1, FifoScope::System) + 1 == all) p.storeRelaxed(&seq->arrived, 0, FifoScope::System);
  }
}

}  // namespace loom::cuda
