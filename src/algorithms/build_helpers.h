// Shared pieces of the plan builders (ring.cc, direct.cc, tree.cc, one_shot.cc, hierarchical.cc, p2p.cc): splitting data fairly, step
// constructors, request validation and the bookkeeping every plan ends with. Internal to algorithms/.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "algorithms/builders.h"
#include "algorithms/plan.h"
#include "base/status.h"

namespace loom::detail {

// A half-open range of elements [begin, end).
struct Range {
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t size() const { return end - begin; }
  bool empty() const { return end == begin; }
  Range shifted(uint64_t by) const { return {begin + by, end + by}; }
};

inline uint64_t ceilDiv(uint64_t a, uint64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

// Part i of `parts` contiguous parts of [0, total) whose sizes differ by at most one (the first
// total % parts parts are the larger ones). Every rank computes the same split, which is what keeps
// senders and receivers agreeing on message sizes without talking.
inline Range fairPart(uint64_t total, uint64_t parts, uint64_t i) {
  const uint64_t q = total / parts;
  const uint64_t rem = total % parts;
  const uint64_t begin = i * q + std::min(i, rem);
  return {begin, begin + q + (i < rem ? 1 : 0)};
}

// Messages needed for `elems` elements when one message holds at most `chunk`.
inline uint64_t pieceCount(uint64_t elems, uint64_t chunk) { return ceilDiv(elems, chunk); }

// How the builders cut data into channels' parts, ranks' blocks and messages: as fairPart, but in whole
// grains of 16 bytes (the GPU's vector width), the fewer than a grain left over with the last part.
// Every part then starts 16-byte aligned relative to its range's start, so a plan kernel's copies and
// reductions of every full piece take the 16-byte path (kernels/cuda/element_ops.cuh) instead of one
// element at a time. Splitting at most P x chunk elements into P parts still gives parts of at most
// `chunk` when chunk is a whole number of grains (else the grain is one element). Every rank computes
// the same split.
struct Split {
  uint64_t grain = 1;
  Range part(uint64_t total, uint64_t parts, uint64_t i) const {
    if (grain == 1) return fairPart(total, parts, i);
    const Range units = fairPart(total / grain, parts, i);
    Range r{units.begin * grain, units.end * grain};
    if (i + 1 == parts) r.end = total;  // the leftover of fewer than a grain
    return r;
  }
  // The size of the largest of `parts` parts of `total`.
  uint64_t largest(uint64_t total, uint64_t parts) const {
    uint64_t most = 0;
    for (uint64_t i : {uint64_t{0}, parts - 1}) most = std::max(most, part(total, parts, i).size());
    return most;
  }
};
inline constexpr uint64_t kVectorBytes = 16;
inline Split splitFor(uint64_t elemSize, uint64_t chunkElems) {
  const bool fits = elemSize > 0 && elemSize < kVectorBytes && kVectorBytes % elemSize == 0;
  const uint64_t grain = fits ? kVectorBytes / elemSize : 1;
  return Split{chunkElems % grain == 0 ? grain : 1};
}
inline Split splitFor(const PlanRequest& req) { return splitFor(req.elemSize, req.chunkElems); }

inline int wrap(int64_t value, int n) { return static_cast<int>(((value % n) + n) % n); }

// Checks everything a collective builder relies on: ranks, root, chunk, channels, rings, overflow.
Status validateRequest(const PlanRequest& req);

// A channel's ring: req.rings[channel % rings.size()] or the identity, and this rank's place in it.
// It refers to req.rings (no copy: simulations build plans for a thousand ranks at a time).
struct RingOrder {
  const std::vector<int>* order = nullptr;  // nullptr: the identity
  int n = 1;
  int pos = 0;  // position of req.rank
  int at(int64_t position) const {
    const int p = wrap(position, n);
    return order != nullptr ? (*order)[p] : p;
  }
  int next() const { return at(pos + 1); }
  int prev() const { return at(pos - 1); }
  int positionOf(int rank) const {
    if (order == nullptr) return rank;
    for (size_t p = 0; p < order->size(); ++p)
      if ((*order)[p] == rank) return static_cast<int>(p);
    return 0;
  }
};
RingOrder ringOrder(const PlanRequest& req, int channel);

inline BufRef ref(uint32_t buffer, uint64_t offset) { return BufRef{buffer, offset}; }
inline BufRef sendRef(uint64_t offset) { return ref(kSendBuffer, offset); }
inline BufRef recvRef(uint64_t offset) { return ref(kRecvBuffer, offset); }

Step sendStep(int peer, BufRef src, uint64_t count);
Step recvStep(int peer, BufRef dst, uint64_t count);
Step recvReduceStep(int peer, BufRef src, BufRef dst, uint64_t count, bool finalize);
Step recvReduceSendStep(int recvPeer, int sendPeer, BufRef src, BufRef dst, uint64_t count, bool finalize);
Step recvCopySendStep(int recvPeer, int sendPeer, BufRef dst, uint64_t count);
Step copyStep(BufRef src, BufRef dst, uint64_t count, bool finalize);
Step reduceStep(BufRef src, BufRef dst, uint64_t count, bool finalize);  // dst = dst (op) src

// Resets *plan for req (coll, nranks, rank, algorithm; no lanes).
void startPlan(const PlanRequest& req, const char* algorithm, Plan* plan);
// Drops lanes without steps and sets maxMessageElems and nchannels from what the lanes use.
void finishPlan(Plan* plan);
// nranks == 1: the whole operation is one local copy (finalizing for reductions).
void buildSingleRankPlan(const PlanRequest& req, const char* algorithm, Plan* plan);

}  // namespace loom::detail
