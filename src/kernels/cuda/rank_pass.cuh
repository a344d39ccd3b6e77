// The elementwise pass of peer-memory plans (plan_interpreter.cuh's ReduceRanks and peer copies): up to
// kMaxPeerRanks sources combined in rank order, the result stored into up to kMaxPeerRanks
// destinations, in one pass. The order is one-shot's, acc = x0; acc = acc (op) x1; ...; each partial
// result rounded to the element type as a separate Reduce step would, the post-operation with the last,
// so that a ReduceRanks has exactly the bits of the one-shot plan's Copy and Reduce steps.
//
// The pass's arguments live where all of a lane's workers read them (its shared state): the source and
// destination tables are indexed at run time, and a table in registers would go to local memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/device_plan_layout.h"
#include "kernels/cuda/element_ops.cuh"

namespace loom::cuda {

struct RankPassArgs {
  ElementwiseArgs shape;  // count, head, vectors and the operator (shape.dst/a/b unused)
  char* dst[kMaxPeerRanks];
  const char* src[kMaxPeerRanks];
  uint32_t ndst;
  uint32_t nsrc;
};

// Splits the pass into head / 16-byte vectors / tail: vectors only when every pointer has the same
// offset within a vector.
LOOM_HD void planRankPass(RankPassArgs* args, const ReduceOp& op, bool finalize, size_t count, size_t elemSize) {
  ElementwiseArgs& e = args->shape;
  e = ElementwiseArgs{};
  e.count = count;
  e.kind = op.kind;
  e.post = finalize ? op.post : PostOpKind::None;
  e.divisor = op.divisor;
  e.scalar = op.scalar;
  e.intScalar = op.intScalar;
  const uintptr_t phase = reinterpret_cast<uintptr_t>(args->src[0]) % kVectorBytes;
  bool same = phase % elemSize == 0;
  for (uint32_t i = 0; i < args->nsrc; ++i) same = same && reinterpret_cast<uintptr_t>(args->src[i]) % kVectorBytes == phase;
  for (uint32_t i = 0; i < args->ndst; ++i) same = same && reinterpret_cast<uintptr_t>(args->dst[i]) % kVectorBytes == phase;
  const size_t headElems = phase == 0 ? 0 : (kVectorBytes - phase) / elemSize;
  if (!same || headElems >= count) {
    e.head = count;
    return;
  }
  e.head = headElems;
  e.vectors = (count - headElems) * elemSize / kVectorBytes;
}

template <class E, Combine K, size_t Unroll>
LOOM_HD void rankPassRange(const RankPassArgs& args, size_t tid, size_t nthreads) {
  using S = typename E::Storage;
  constexpr size_t V = kVectorBytes / sizeof(S);
  const ElementwiseArgs& e = args.shape;
  const PostOp<typename E::Compute> post(e);
  ElementwiseArgs plain = e;
  plain.post = PostOpKind::None;
  const PostOp<typename E::Compute> none(plain);
  const uint32_t nsrc = args.nsrc;

  for (size_t first = tid; first < e.vectors; first += nthreads * Unroll) {
    uint4 acc[Unroll]{};
LOOM_UNROLL
    for (size_t u = 0; u < Unroll; ++u) {
      const size_t v = first + u * nthreads;
      if (v < e.vectors) acc[u] = loadVector(reinterpret_cast<const S*>(args.src[0]) + e.head + v * V);
    }
    if (nsrc == 1 && post.kind != PostOpKind::None) {
LOOM_UNROLL
      for (size_t u = 0; u < Unroll; ++u) {
        S x[V];
        std::memcpy(x, &acc[u], sizeof x);
LOOM_UNROLL
        for (size_t j = 0; j < V; ++j) x[j] = oneElement<E, Combine::Copy>(x[j], x[j], post);
        std::memcpy(&acc[u], x, sizeof x);
      }
    }
    for (uint32_t r = 1; r < nsrc; ++r) {
      uint4 in[Unroll]{};
      const S* src = reinterpret_cast<const S*>(args.src[r]);
LOOM_UNROLL
      for (size_t u = 0; u < Unroll; ++u) {
        const size_t v = first + u * nthreads;
        if (v < e.vectors) in[u] = loadVector(src + e.head + v * V);
      }
      // The post-operation with the last source's combine only (a copy, by value: a reference to one
      // of two objects would put both on the stack).
      const PostOp<typename E::Compute> p = r + 1 == nsrc ? post : none;
LOOM_UNROLL
      for (size_t u = 0; u < Unroll; ++u) {
        S x[V], y[V];
        std::memcpy(x, &acc[u], sizeof x);
        std::memcpy(y, &in[u], sizeof y);
LOOM_UNROLL
        for (size_t j = 0; j < V; ++j) x[j] = oneElement<E, K>(x[j], y[j], p);
        std::memcpy(&acc[u], x, sizeof x);
      }
    }
    for (uint32_t d = 0; d < args.ndst; ++d) {
      S* dst = reinterpret_cast<S*>(args.dst[d]);
LOOM_UNROLL
      for (size_t u = 0; u < Unroll; ++u) {
        const size_t v = first + u * nthreads;
        if (v < e.vectors) storeVector(dst + e.head + v * V, acc[u]);
      }
    }
  }

  // The unaligned head and the tail, element by element.
  const size_t tailStart = e.head + e.vectors * V;
  const size_t edge = e.head + (e.count - tailStart);
  for (size_t k = tid; k < edge; k += nthreads) {
    const size_t i = k < e.head ? k : tailStart + (k - e.head);
    S x = reinterpret_cast<const S*>(args.src[0])[i];
    if (nsrc == 1) x = oneElement<E, Combine::Copy>(x, x, post);
    for (uint32_t r = 1; r < nsrc; ++r) {
      const PostOp<typename E::Compute> p = r + 1 == nsrc ? post : none;
      x = oneElement<E, K>(x, reinterpret_cast<const S*>(args.src[r])[i], p);
    }
    for (uint32_t d = 0; d < args.ndst; ++d) reinterpret_cast<S*>(args.dst[d])[i] = x;
  }
}

// One worker's share of the pass (the operator's switch is uniform across the lane).
template <class E, size_t Unroll>
LOOM_HD void rankPassThread(const RankPassArgs& args, size_t tid, size_t nthreads) {
  if (args.nsrc == 1) {
    rankPassRange<E, Combine::Copy, Unroll>(args, tid, nthreads);
    return;
  }
  switch (args.shape.kind) {
    case ReduceKind::Sum: rankPassRange<E, Combine::Sum, Unroll>(args, tid, nthreads); break;
    case ReduceKind::Prod: rankPassRange<E, Combine::Prod, Unroll>(args, tid, nthreads); break;
    case ReduceKind::Max: rankPassRange<E, Combine::Max, Unroll>(args, tid, nthreads); break;
    case ReduceKind::Min: rankPassRange<E, Combine::Min, Unroll>(args, tid, nthreads); break;
  }
}

}  // namespace loom::cuda
