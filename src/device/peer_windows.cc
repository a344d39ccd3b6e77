#include "device/peer_windows.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "base/log.h"
#include "device/ipc_mappings.h"
#include "device/memory_kind.h"
#include "device/p2p_fifos.h"
#include "device/private_stream.h"

namespace loom::device {
namespace {

// One rank's side of a registration, exchanged with every rank.
struct WindowOffer {
  uint32_t ok = 0;
  uint32_t slot = 0;
  uint64_t address = 0;  // the window as its rank addresses it
  uint64_t bytes = 0;
  uint64_t offset = 0;   // of address into the allocation the handle names
  cudaIpcMemHandle_t handle{};
  char why[200] = {0};
};

// Collective steps of a registration fail on every rank with the first rank's reason.
Status agreed(std::span<const WindowOffer> offers, const char* what) {
  for (const WindowOffer& o : offers)
    if (!o.ok) return invalidArgument("{}: {}", what, o.why);
  for (const WindowOffer& o : offers)
    if (o.slot != offers[0].slot)
      return errorStatus(loomInvalidUsage,
                         "{}: the ranks' windows differ (slot {} and {}): every rank registers and deregisters the "
                         "same windows in the same order",
                         what, offers[0].slot, o.slot);
  return Status::Ok();
}

}  // namespace

PeerWindows::~PeerWindows() {
  DeviceScope scope(tableDevice_);
  for (uint32_t slot = 0; slot < opened_.size(); ++slot) unmapSlot(slot);
  if (deviceTable_) cudaFree(deviceTable_);
}

std::pair<void*, size_t> PeerWindows::window(uint32_t slot) const {
  if (slot >= own_.size() || !own_[slot].address) return {nullptr, 0};
  return {const_cast<char*>(own_[slot].address), own_[slot].bytes};
}

bool PeerWindows::holds(const void* p, size_t bytes) const {
  const char* at = static_cast<const char*>(p);
  for (const Own& o : own_)
    if (o.mapped && at >= o.address && static_cast<size_t>(at - o.address) + bytes <= o.bytes) return true;
  return false;
}

void PeerWindows::unmapSlot(uint32_t slot) {
  if (slot >= opened_.size()) return;
  for (char*& mapped : opened_[slot])
    if (mapped) closeIpcMapping(std::exchange(mapped, nullptr));
}

Status PeerWindows::uploadTable(int device) {
  DeviceScope scope(device);
  if (!deviceTable_) {
    void* table = nullptr;
    LOOM_CUDA_TRY(cudaMalloc(&table, sizeof(cuda::DeviceWindowTable)));
    deviceTable_ = static_cast<cuda::DeviceWindowTable*>(table);
    tableDevice_ = device;
  }
  return runOnPrivateStream(
      [&](cudaStream_t s) { return cudaMemcpyAsync(deviceTable_, &table_, sizeof table_, cudaMemcpyHostToDevice, s); },
      "cudaMemcpyAsync of the window table");
}

Status PeerWindows::add(void* address, size_t bytes, int device, bool map, uint32_t* slot) {
  const int rank = exchange_.rank();
  const char* at = static_cast<const char*>(address);
  WindowOffer mine;
  mine.address = reinterpret_cast<uintptr_t>(address);
  mine.bytes = bytes;
  mine.slot = static_cast<uint32_t>(std::find_if(own_.begin(), own_.end(), [](const Own& o) { return !o.address; }) -
                                    own_.begin());
  std::string why;
  const MemoryInfo info = queryMemory(address);
  const char* base = nullptr;
  size_t allocated = 0;
  if (!address || bytes == 0) {
    why = "an empty range (NULL or 0 bytes)";
  } else if (info.kind != MemoryKind::Device) {
    why = fmt::format("{} is not CUDA device memory", address);
  } else if (device >= 0 && info.device != device) {
    why = fmt::format("{} is on GPU {}; the communicator runs on GPU {}", address, info.device, device);
  } else if (Status found = allocationOf(address, &base, &allocated); !found.ok()) {
    why = found.message();
  } else if (at + bytes > base + allocated) {
    why = fmt::format("{} bytes at {} run past its allocation ({} bytes at {})", bytes, address, allocated,
                      static_cast<const void*>(base));
  } else if (std::any_of(own_.begin(), own_.end(), [&](const Own& o) {
               return o.address && at < o.address + o.bytes && o.address < at + bytes;
             })) {
    why = fmt::format("{} bytes at {} overlap a window of this communicator", bytes, address);
  } else if (mine.slot >= cuda::kMaxWindows) {
    why = fmt::format("the communicator holds {} windows, the most it may", cuda::kMaxWindows);
  }
  mine.ok = why.empty();
  if (!why.empty()) std::snprintf(mine.why, sizeof mine.why, "rank %d: %s", rank, why.c_str());
  std::vector<WindowOffer> offers(exchange_.nranks());
  LOOM_TRY(exchange_.allGather(&mine, offers.data(), sizeof mine).withContext("window registration"));
  LOOM_TRY(agreed(offers, "window registration"));
  const uint32_t s = mine.slot;
  if (own_.size() <= s) own_.resize(s + 1);
  own_[s] = Own{at, bytes, base, false};
  if (map) {
    if (Status shared = share(s, device); !shared.ok()) {
      own_[s] = Own{};
      return shared.withContext("window registration");
    }
  }
  *slot = s;
  LOOM_INFO(Init, "rank {}: window {} of {} bytes at {}{}", rank, s, bytes, address,
            map ? ", mapped by every rank" : " (mapped only where plan kernels find rank processes sharing the GPU)");
  return Status::Ok();
}

Status PeerWindows::mapAll(int device) {
  for (uint32_t s = 0; s < own_.size(); ++s)
    if (own_[s].address && !own_[s].mapped)
      if (Status shared = share(s, device); !shared.ok()) {
        if (shared.code() != loomInvalidArgument) return shared;  // an exchange failed
        LOOM_WARN(Init, "rank {}: window {} stays out of peer-memory plans: {}", exchange_.rank(), s, shared.message());
      }
  return Status::Ok();
}

Status PeerWindows::share(uint32_t s, int device) {
  const int rank = exchange_.rank();
  const int nranks = exchange_.nranks();
  const Own& window = own_[s];
  WindowOffer mine;
  mine.slot = s;
  mine.address = reinterpret_cast<uintptr_t>(window.address);
  mine.bytes = window.bytes;
  mine.offset = static_cast<uint64_t>(window.address - window.allocation);
  std::string why;
  DeviceScope scope(device);
  if (!coveredByPeerAccess(window.address)) {
    why = fmt::format("{} is not memory CUDA IPC can share with other processes (cudaMalloc's is; stream-ordered "
                      "pools' and cuMem allocations are not)",
                      static_cast<const void*>(window.address));
  } else if (Status got = cudaStatus(cudaIpcGetMemHandle(&mine.handle, const_cast<char*>(window.allocation)),
                                     "cudaIpcGetMemHandle");
             !got.ok()) {
    why = got.message();
  }
  mine.ok = why.empty();
  if (!why.empty()) std::snprintf(mine.why, sizeof mine.why, "rank %d: %s", rank, why.c_str());
  std::vector<WindowOffer> offers(nranks);
  LOOM_TRY(exchange_.allGather(&mine, offers.data(), sizeof mine));
  LOOM_TRY(agreed(offers, "sharing a window"));

  // Every rank arrived, so every rank enqueued its launches before this call: mapping and allocating,
  // which may synchronize the device, can no longer hold back a peer's kernel that this rank's waits for.
  if (opened_.size() <= s) opened_.resize(s + 1);
  opened_[s].assign(nranks, nullptr);
  std::string failure;
  for (int q = 0; q < nranks && failure.empty(); ++q) {
    cuda::DeviceWindowView& v = table_.views[s][q];
    v = cuda::DeviceWindowView{offers[q].address, offers[q].bytes, offers[q].address};
    if (q == rank || processes_[q].sameProcess(processes_[rank])) continue;
    char* mapped = nullptr;
    if (Status opened = openIpcMapping(offers[q].handle, &mapped); !opened.ok()) {
      failure = fmt::format("rank {} cannot map rank {}'s window: {}", rank, q, opened.message());
      break;
    }
    opened_[s][q] = mapped;
    v.local = reinterpret_cast<uintptr_t>(mapped) + offers[q].offset;
  }
  table_.slotsUsed = std::max(table_.slotsUsed, s + 1);
  if (failure.empty())
    if (Status up = uploadTable(device); !up.ok()) failure = fmt::format("rank {}: {}", rank, up.message());
  std::string refusal;  // the first rank's failure, the same on every rank
  Status agreedMaps = agreeOnSetupStep(exchange_, failure, &refusal);
  if (!agreedMaps.ok() || !refusal.empty()) {
    unmapSlot(s);
    for (cuda::DeviceWindowView& v : table_.views[s]) v = {};
    LOOM_TRY(agreedMaps);
    return invalidArgument("sharing a window: {}", refusal);
  }
  own_[s].mapped = true;
  return Status::Ok();
}

Status PeerWindows::remove(uint32_t slot) {
  WindowOffer mine;
  mine.slot = slot;
  mine.ok = slot < own_.size() && own_[slot].address ? 1 : 0;
  if (!mine.ok) std::snprintf(mine.why, sizeof mine.why, "rank %d: no window in slot %u", exchange_.rank(), slot);
  std::vector<WindowOffer> offers(exchange_.nranks());
  LOOM_TRY(exchange_.allGather(&mine, offers.data(), sizeof mine).withContext("window deregistration"));
  LOOM_TRY(agreed(offers, "window deregistration"));
  const bool mapped = own_[slot].mapped;
  own_[slot] = Own{};
  if (!mapped) return Status::Ok();
  {
    DeviceScope scope(tableDevice_);
    unmapSlot(slot);
  }
  for (cuda::DeviceWindowView& v : table_.views[slot]) v = {};
  while (table_.slotsUsed > 0 && table_.views[table_.slotsUsed - 1][exchange_.rank()].owner == 0) --table_.slotsUsed;
  return uploadTable(tableDevice_).withContext("window deregistration");
}

}  // namespace loom::device
