// The memory of plan kernels' network lanes (device_layer.h's NetLanes): for each peer on another host
// and channel, a FIFO the kernel sends into and one it receives from, both in this rank's memory, with
// the layout of the p2p transport's (kernels/cuda/device_plan_layout.h) so that the kernel cannot tell
// them apart. The proxy (core's transport) moves their messages over the network.
//
// - Counters (tail, head, each on its own line) and size words: pinned host memory, mapped for the GPU.
//   The proxy polls them locally; the kernel reads and writes them across PCIe, as NCCL's net
//   transport does.
// - Slots: pinned host memory as well (staged: the NIC never touches GPU memory), or GPU memory when
//   GPUDirect RDMA was chosen for this GPU and NIC (the proxy registers it through dmabuf or as CUDA
//   pointers, and flushes each receive before the kernel sees it).
//
// Allocated at the plan-kernel setup, before its last exchange (nothing may be allocated after a
// peer could have launched), and freed with the communicator, after the proxy let go of the slots.
// CUDA builds only; no CUDA header is needed to include this file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "device/device_layer.h"

namespace loom::device {

class NetLaneFifos {
 public:
  // `netPeers[q]`: rank q is on another host. Its FIFOs are channels 0..laneChannels-1 of tables
  // indexed peer * nchannels + channel. On `device` (current when called).
  static Status allocate(int device, NetLanes::Slots slots, const std::vector<bool>& netPeers, uint32_t nchannels,
                         uint32_t laneChannels, uint32_t nslots, size_t slotBytes, std::unique_ptr<NetLaneFifos>* out);
  ~NetLaneFifos();
  NetLaneFifos(const NetLaneFifos&) = delete;
  NetLaneFifos& operator=(const NetLaneFifos&) = delete;

  const NetLaneTables& tables() const { return tables_; }
  size_t hostBytes() const { return hostBytes_; }
  size_t gpuBytes() const { return gpuBytes_; }

 private:
  NetLaneFifos() = default;
  int device_ = -1;
  char* host_ = nullptr;  // cudaHostAlloc, mapped (with unified addressing: one address for both sides)
  char* gpu_ = nullptr;   // cudaMalloc: the slots, when they live on the GPU
  size_t hostBytes_ = 0, gpuBytes_ = 0;
  NetLaneTables tables_;
};

}  // namespace loom::device
