// The plan kernels' FIFO layout (LOOM_DEVICE_CHUNK_BYTES, LOOM_DEVICE_FIFO_SLOTS): the slots per FIFO and
// their size, which the p2p transport sets up (p2p_fifos.h) and the cost model assumes for device memory
// (model/job_model.cc). A slot is the largest step a plan kernel makes, and every step pays a handshake,
// so the default is NCCL's 8 slots of 512 KiB; fitted to the memory it takes. No CUDA needed.
#pragma once

#include <cstddef>
#include <cstdint>

namespace loom::device {

struct DeviceFifoLayout {
  uint32_t nslots = 8;
  size_t slotBytes = 512 << 10;
  // The default layout's way (neither setting given; a layout that was asked for is kept): on one host,
  // slotBytes halved (not below kSmallestFittedSlot) while one rank's block would pass kFifoBlockBudget;
  // across hosts, the host transports' layout below, as the network lanes' FIFOs (pinned host or
  // NIC-registered memory, one set per peer on another host) must not grow with it.
  bool fit = false;
  uint32_t acrossHostsNslots = 4;
  size_t acrossHostsSlotBytes = 128 << 10;
};

// What a default layout fits in: one rank's block (a region per peer on its host and channel) at most
// this much GPU memory, its slots not below the host transports' default.
inline constexpr size_t kFifoBlockBudget = size_t{256} << 20;
inline constexpr size_t kSmallestFittedSlot = size_t{128} << 10;

// The slot size `wanted`, halved while `regions` regions of `nslots` slots would pass the budget.
inline size_t fittedSlotBytes(size_t wanted, uint32_t nslots, size_t regions) {
  size_t slot = wanted;
  while (slot / 2 >= kSmallestFittedSlot && regions * nslots * slot > kFifoBlockBudget) slot /= 2;
  return slot;
}

// The layout a job sets up: `asked` as it is, or fitted (asked.fit) to a job of `hosts` hosts whose
// busiest holds `mostRanksOnAHost` ranks, with `nchannels` FIFO channels per peer.
inline DeviceFifoLayout layoutForJob(const DeviceFifoLayout& asked, size_t hosts, size_t mostRanksOnAHost,
                                     uint32_t nchannels) {
  DeviceFifoLayout out = asked;
  out.fit = false;
  if (!asked.fit) return out;
  if (hosts > 1) {
    out.nslots = asked.acrossHostsNslots;
    out.slotBytes = asked.acrossHostsSlotBytes;
  } else {
    const size_t regions = (mostRanksOnAHost > 0 ? mostRanksOnAHost - 1 : 0) * nchannels;
    out.slotBytes = fittedSlotBytes(asked.slotBytes, asked.nslots, regions);
  }
  return out;
}

}  // namespace loom::device
