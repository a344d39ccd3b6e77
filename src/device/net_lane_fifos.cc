#include "device/net_lane_fifos.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>

#include "device/memory_kind.h"
#include "kernels/cuda/device_plan_layout.h"

namespace loom::device {

Status NetLaneFifos::allocate(int device, NetLanes::Slots slots, const std::vector<bool>& netPeers,
                              uint32_t nchannels, uint32_t laneChannels, uint32_t nslots, size_t slotBytes,
                              std::unique_ptr<NetLaneFifos>* out) {
  out->reset();
  std::unique_ptr<NetLaneFifos> f(new NetLaneFifos());
  f->device_ = device;
  slotBytes = cuda::alignToFifoLine(slotBytes);
  size_t fifos = 0;
  for (bool net : netPeers) fifos += net ? 2 * laneChannels : 0;
  const bool slotsOnGpu = slots != NetLanes::Slots::HostPinned;
  const size_t counterBytes = 2 * cuda::kFifoLine + cuda::alignToFifoLine(nslots * sizeof(uint64_t));
  const size_t slotRegion = static_cast<size_t>(nslots) * slotBytes;
  f->hostBytes_ = std::max<size_t>(1, fifos * (counterBytes + (slotsOnGpu ? 0 : slotRegion)));
  void* host = nullptr;
  LOOM_CUDA_TRY(cudaHostAlloc(&host, f->hostBytes_, cudaHostAllocMapped | cudaHostAllocPortable));
  f->host_ = static_cast<char*>(host);
  std::memset(f->host_, 0, f->hostBytes_);
  // The proxy and the kernel read the same DeviceFifo: the mapping must have the host's address, as it
  // has with unified addressing (every 64-bit platform CUDA supports).
  void* mapped = nullptr;
  LOOM_CUDA_TRY(cudaHostGetDevicePointer(&mapped, host, 0));
  if (mapped != host)
    return errorStatus(loomSystemError, "GPU {} maps pinned host memory at another address (no unified addressing)",
                       device);
  if (slotsOnGpu) {
    f->gpuBytes_ = std::max<size_t>(1, fifos * slotRegion);
    void* gpu = nullptr;
    LOOM_CUDA_TRY(cudaMalloc(&gpu, f->gpuBytes_));
    f->gpu_ = static_cast<char*>(gpu);
  }

  const size_t n = netPeers.size() * nchannels;
  f->tables_.nchannels = nchannels;
  f->tables_.laneChannels = laneChannels;
  f->tables_.sends.assign(n, cuda::DeviceFifo{});
  f->tables_.recvs.assign(n, cuda::DeviceFifo{});
  char* nextHost = f->host_;
  char* nextGpu = f->gpu_;
  auto carve = [&]() {
    cuda::DeviceFifo fifo;
    fifo.tail = reinterpret_cast<uint64_t*>(nextHost);
    fifo.head = reinterpret_cast<uint64_t*>(nextHost + cuda::kFifoLine);
    fifo.sizes = reinterpret_cast<uint64_t*>(nextHost + 2 * cuda::kFifoLine);
    nextHost += counterBytes;
    if (slotsOnGpu) {
      fifo.slots = nextGpu;
      nextGpu += slotRegion;
    } else {
      fifo.slots = nextHost;
      nextHost += slotRegion;
    }
    fifo.slotBytes = slotBytes;
    fifo.nslots = nslots;
    return fifo;  // no posts: a peer on another host cannot write into this rank's buffers
  };
  for (size_t q = 0; q < netPeers.size(); ++q)
    for (uint32_t c = 0; netPeers[q] && c < laneChannels; ++c) {
      f->tables_.sends[q * nchannels + c] = carve();
      f->tables_.recvs[q * nchannels + c] = carve();
    }
  *out = std::move(f);
  return Status::Ok();
}

NetLaneFifos::~NetLaneFifos() {
  DeviceScope scope(device_);
  if (gpu_) cudaFree(gpu_);
  if (host_) cudaFreeHost(host_);
}

}  // namespace loom::device
