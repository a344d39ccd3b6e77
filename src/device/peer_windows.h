// A communicator's windows (loomCommWindowRegister, ncclCommWindowRegister): device buffers every rank
// registers collectively, so that rank processes on one GPU can read and write each other's buffers in
// a peer-memory plan (algorithms/peer_memory.cc), as rank threads of one process always can.
//
// A plan kernel publishes its call's buffers as its own process addresses them (the board of
// kernels/cuda/device_plan_layout.h); a peer in another process reads them through its own mapping of
// the window holding them. So each registration is exchanged with every rank: the range as its owner
// addresses it and a CUDA IPC handle of the allocation holding it; each rank maps the others' (once
// per process and allocation, ipc_mappings.h) and fills one slot of a table in device memory
// (cuda::DeviceWindowTable: by slot and rank, the owner's range and this rank's view of it), which the
// plan kernels read at a plan's first Meet. Slots are given out lowest free first, so every rank gives
// a window the same slot (registrations are collective, in the same order everywhere).
//
// Only where the setup found that ranks in other processes share this GPU (PeerReach::Windows) are
// windows mapped; elsewhere a registration is checked and agreed like any other, and kept for the
// caller's bookkeeping (rank threads of one process need no window: they address any buffer).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/exchange.h"
#include "base/process_identity.h"
#include "base/status.h"
#include "kernels/cuda/device_plan_layout.h"

namespace loom::device {

class PeerWindows {
 public:
  PeerWindows(PeerExchange& exchange, std::span<const ProcessIdentity> processes)
      : exchange_(exchange), processes_(processes.begin(), processes.end()) {}
  ~PeerWindows();  // unmaps the peers' windows and frees the device table
  PeerWindows(const PeerWindows&) = delete;
  PeerWindows& operator=(const PeerWindows&) = delete;

  // Collective: this rank's [address, address + bytes) becomes a window, in slot *slot. `device` is the
  // GPU the communicator's plan kernels run on (-1: not set up yet); `map`: the peers' windows are
  // mapped now, for peer-memory plans. Every rank fails alike (loomInvalidArgument naming the rank and
  // why) when one rank's range is not device memory (of that GPU), runs past its allocation, overlaps a
  // window of this communicator, or cannot be shared through CUDA IPC, or when the slots ran out.
  Status add(void* address, size_t bytes, int device, bool map, uint32_t* slot);
  // Collective, when plan kernels were set up after windows were registered and found rank processes
  // sharing `device`: maps every window not mapped yet. One that cannot be shared (on some rank) stays
  // out of peer-memory plans, with a warning; an error only when an exchange failed.
  Status mapAll(int device);
  // Collective: the window in `slot` ends on every rank. The caller made sure that no launch in flight
  // uses it (the communicator waits for its launches).
  Status remove(uint32_t slot);
  // This rank's window in `slot` (nullptr, 0 when the slot is free).
  std::pair<void*, size_t> window(uint32_t slot) const;
  // Whether [p, p + bytes) lies inside one window of this rank that every rank mapped (bytes 0: p does).
  bool holds(const void* p, size_t bytes) const;
  // The table the plan kernels translate peers' buffers with; null until a window was mapped.
  const cuda::DeviceWindowTable* deviceTable() const { return deviceTable_; }

 private:
  struct Own {
    const char* address = nullptr;
    size_t bytes = 0;
    const char* allocation = nullptr;  // the start of the allocation holding it (what a CUDA IPC handle names)
    bool mapped = false;
  };
  // Collective: every rank's window in `slot` mapped by every other rank, and the device table updated.
  Status share(uint32_t slot, int device);
  Status uploadTable(int device);
  void unmapSlot(uint32_t slot);

  PeerExchange& exchange_;
  std::vector<ProcessIdentity> processes_;
  std::vector<Own> own_;  // by slot
  std::vector<std::vector<char*>> opened_;  // by slot, then rank: the IPC mapping opened (to close), or null
  cuda::DeviceWindowTable table_;  // the host's copy
  cuda::DeviceWindowTable* deviceTable_ = nullptr;
  int tableDevice_ = -1;
};

}  // namespace loom::device
