// Filling inputs and counting wrong outputs. Runs outside the timed loop.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collectives.h"
#include "pattern.h"

namespace loomperf {

struct BufferView {
  void* send;
  size_t sendCount;
  void* recv;
  size_t recvCount;
};

// Poisons the receive region (a value the pattern never produces, NaN for floats) and then writes
// this rank's input into the send region; in place the send region lies inside the receive region.
void prepareBuffers(loomDataType_t type, const ValuePattern& pattern, const RankView& view,
                    const BufferView& buffers);

// Elements of the receive region that differ from what `collective` must produce (0 on ranks
// without an output).
uint64_t countWrong(const Collective& collective, loomDataType_t type, const ValuePattern& pattern,
                    const RankView& view, const BufferView& buffers);

}  // namespace loomperf
