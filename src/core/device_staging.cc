// Staging of device buffers through pinned host memory (device_staging.h). Compiled only with the
// CUDA feature; listed in src/kernels/cuda/meson.build so that src/core/meson.build stays as it is.
#include "core/device_staging.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "base/datatype.h"
#include "core/communicator.h"
#include "kernels/cuda/memory_kind.h"
#include "kernels/cuda/pinned_pool.h"

namespace loom {
namespace {

using cuda::MemoryInfo;
using cuda::MemoryKind;

cudaStream_t asCuda(loomStream_t s) { return reinterpret_cast<cudaStream_t>(s); }

// One pinned copy of a device range: the union of an operation's send and receive ranges when they
// overlap (in-place layouts keep their pointer relations), else one range each.
struct Region {
  const char* device = nullptr;
  size_t bytes = 0;
  int deviceId = -1;
  cuda::PinnedBlock pinned;

  bool contains(const void* p) const {
    auto* c = static_cast<const char*>(p);
    return c >= device && c <= device + bytes;
  }
  char* map(const void* p) const { return pinned.data() + (static_cast<const char*>(p) - device); }
};

struct CopyOut {
  char* device;
  const char* host;
  size_t bytes;
  int deviceId;
  loomStream_t stream;
};

class Staging {
 public:
  // Rewrites op's device pointers to pinned copies, enqueues the copy of its input and records the
  // copy of its output. Managed memory is used in place, after its stream is synchronized.
  Status stage(Operation* op) {
    size_t sendBytes = 0, recvBytes = 0;
    bufferBytes(*op, &sendBytes, &recvBytes);
    const MemoryInfo send = sendBytes ? cuda::queryMemory(op->send) : MemoryInfo{};
    const MemoryInfo recv = recvBytes ? cuda::queryMemory(op->recv) : MemoryInfo{};
    for (const MemoryInfo* m : {&send, &recv})
      if (m->kind != MemoryKind::Host) noteStream(op->stream, m->device);
    const bool sendDev = send.kind == MemoryKind::Device, recvDev = recv.kind == MemoryKind::Device;
    if (!sendDev && !recvDev) return Status::Ok();

    const char* s = static_cast<const char*>(op->send);
    char* r = static_cast<char*>(op->recv);
    Region* sendRegion = nullptr;
    Region* recvRegion = nullptr;
    if (sendDev && recvDev && s < r + recvBytes && r < s + sendBytes) {
      const char* lo = std::min<const char*>(s, r);
      const char* hi = std::max<const char*>(s + sendBytes, r + recvBytes);
      LOOM_TRY(addRegion(lo, static_cast<size_t>(hi - lo), send.device, &sendRegion));
      recvRegion = sendRegion;
    } else {
      if (sendDev) LOOM_TRY(addRegion(s, sendBytes, send.device, &sendRegion));
      if (recvDev) LOOM_TRY(addRegion(r, recvBytes, recv.device, &recvRegion));
    }
    if (sendRegion) {
      cuda::DeviceScope scope(sendRegion->deviceId);
      LOOM_CUDA_TRY(scope.error());
      LOOM_CUDA_TRY(cudaMemcpyAsync(sendRegion->map(s), s, sendBytes, cudaMemcpyDeviceToHost, asCuda(op->stream)));
    }
    if (recvRegion) outs_.push_back(CopyOut{r, recvRegion->map(r), recvBytes, recvRegion->deviceId, op->stream});
    // Pointers the call names but does not use on this rank (a non-root's in-place recvbuff) follow
    // along when they fall inside a staged range, so in-place relations hold on every rank.
    if (const char* p = remap(op->send, sendRegion, recvRegion)) op->send = p;
    if (char* p = remap(op->recv, recvRegion, sendRegion)) op->recv = p;
    return Status::Ok();
  }

  Status synchronize() {
    for (const auto& [stream, device] : streams_) {
      cuda::DeviceScope scope(device);
      LOOM_CUDA_TRY(scope.error());
      LOOM_CUDA_TRY(cudaStreamSynchronize(asCuda(stream)));
    }
    return Status::Ok();
  }

  Status copyOut() {
    for (const CopyOut& c : outs_) {
      cuda::DeviceScope scope(c.deviceId);
      LOOM_CUDA_TRY(scope.error());
      LOOM_CUDA_TRY(cudaMemcpyAsync(c.device, c.host, c.bytes, cudaMemcpyHostToDevice, asCuda(c.stream)));
    }
    return synchronize();
  }

  bool touchesCuda() const { return !streams_.empty(); }

 private:
  Status addRegion(const char* device, size_t bytes, int deviceId, Region** out) {
    auto region = std::make_unique<Region>();
    region->device = device;
    region->bytes = bytes;
    region->deviceId = deviceId;
    LOOM_TRY(region->pinned.acquire(bytes));
    *out = region.get();
    regions_.push_back(std::move(region));
    return Status::Ok();
  }

  static char* remap(const void* p, const Region* first, const Region* second) {
    if (!p) return nullptr;
    for (const Region* region : {first, second})
      if (region && region->contains(p)) return region->map(p);
    return nullptr;
  }

  void noteStream(loomStream_t stream, int device) {
    const auto key = std::make_pair(stream, device);
    if (std::find(streams_.begin(), streams_.end(), key) == streams_.end()) streams_.push_back(key);
  }

  std::vector<std::unique_ptr<Region>> regions_;
  std::vector<CopyOut> outs_;
  std::vector<std::pair<loomStream_t, int>> streams_;  // (stream, device) to synchronize
};

// Nonblocking communicators queue their plans on a progress thread: the pinned buffers must outlive
// that work, so wait for it (this version stays synchronous for device buffers).
Status waitForQueuedWork(const std::vector<Operation>& ops) {
  std::vector<loomComm_t> seen;
  Status first;
  for (const Operation& op : ops) {
    loomComm_t comm = op.comm;
    if (!comm->engine || std::find(seen.begin(), seen.end(), comm) != seen.end()) continue;
    seen.push_back(comm);
    Status st = comm->engine->wait(comm->opCount, -1);
    if (first.ok() && !st.ok()) first = st;
  }
  return first;
}

}  // namespace

Status runWithDeviceStaging(const std::vector<Operation>& ops, HostRunner runHost) {
  if (!cuda::cudaUsable()) return runHost(ops);
  Staging staging;
  std::vector<Operation> staged = ops;
  for (Operation& op : staged) LOOM_TRY(staging.stage(&op).withContext(operationName(op)));
  if (!staging.touchesCuda()) return runHost(ops);
  LOOM_TRY(staging.synchronize().withContext("staging device buffers"));
  Status st = runHost(staged);
  Status waited = waitForQueuedWork(staged);
  if (!st.ok()) return st;
  LOOM_TRY(waited);
  return staging.copyOut().withContext("copying results to device buffers");
}

Status readScalarToHost(const void** scalar, loomDataType_t dtype, void* storage) {
  const MemoryInfo info = cuda::queryMemory(*scalar);
  if (info.kind != MemoryKind::Device) return Status::Ok();
  cuda::DeviceScope scope(info.device);
  LOOM_CUDA_TRY(scope.error());
  LOOM_CUDA_TRY(cudaMemcpy(storage, *scalar, dataTypeSize(dtype), cudaMemcpyDeviceToHost));
  *scalar = storage;
  return Status::Ok();
}

Status checkDeviceList(int ndev, const int* devlist) {
  if (!cuda::cudaUsable())
    return invalidArgument("loomCommInitAll: device lists need a GPU ({}); pass NULL for host ranks",
                           cuda::unusableReason());
  const int visible = cuda::deviceCount();
  for (int i = 0; i < ndev; ++i)
    if (devlist[i] < 0 || devlist[i] >= visible)
      return invalidArgument("loomCommInitAll: devlist[{}] = {} is not one of the {} visible CUDA device(s)", i,
                             devlist[i], visible);
  return Status::Ok();
}

}  // namespace loom
