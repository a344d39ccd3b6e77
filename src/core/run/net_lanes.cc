#include "core/run/net_lanes.h"

#include "transport/net/fifo_proxy.h"

namespace loom {
namespace {

class TransportProxy final : public device::NetLaneProxy {
 public:
  explicit TransportProxy(std::unique_ptr<net::FifoProxy> proxy) : proxy_(std::move(proxy)) {}
  void wake() override { proxy_->wake(); }

 private:
  std::unique_ptr<net::FifoProxy> proxy_;
};

device::NetLanes::Slots slotsFor(net::GdrMode mode) {
  switch (mode) {
    case net::GdrMode::Dmabuf: return device::NetLanes::Slots::GpuDmabuf;
    case net::GdrMode::Peermem: return device::NetLanes::Slots::GpuPeermem;
    case net::GdrMode::Staged: break;
  }
  return device::NetLanes::Slots::HostPinned;
}

int pointerKindOf(device::NetLanes::Slots slots) {
  switch (slots) {
    case device::NetLanes::Slots::GpuDmabuf: return net::kDmabufPointers;
    case device::NetLanes::Slots::GpuPeermem: return net::kCudaPointers;
    case device::NetLanes::Slots::HostPinned: break;
  }
  return net::kHostPointers;
}

}  // namespace

device::NetLanes netLanesFor(loomComm* comm) {
  device::NetLanes lanes;
  TransportSet* transports = comm->transports.get();
  if (!transports || !transports->hasNetPeers()) return lanes;
  lanes.slots = slotsFor(transports->gdrChoice().mode);
  lanes.why = transports->gdrChoice().why;
  if (lanes.why.empty())  // decided only for a rank with a GPU at init (TransportSet::chooseGdr)
    lanes.why = "no GPU was current when the communicator was made, so GPUDirect RDMA was not considered";
  const device::NetLanes::Slots slots = lanes.slots;
  lanes.start = [comm, slots](const device::NetLaneTables& tables, const Status& localError,
                              std::function<void(int peer, const Status&)> onFailure,
                              std::unique_ptr<device::NetLaneProxy>* out) -> Status {
    net::ProxiedFifos fifos;
    fifos.nchannels = tables.nchannels;
    fifos.laneChannels = tables.laneChannels;
    fifos.sends = tables.sends;
    fifos.recvs = tables.recvs;
    fifos.slotPointerKind = pointerKindOf(slots);
    fifos.dmabufOf = [](void* data, size_t bytes, int* fd, uint64_t* offset) -> Status {
      device::DmabufRange range;
      LOOM_TRY(device::exportDmabuf(data, bytes, &range));
      *fd = range.fd;
      *offset = range.offset;
      return Status::Ok();
    };
    std::unique_ptr<net::FifoProxy> proxy;
    LOOM_TRY(comm->transports->startFifoProxy(*comm->bootstrap, std::move(fifos), localError, std::move(onFailure),
                                                      &proxy));
    *out = std::make_unique<TransportProxy>(std::move(proxy));
    return Status::Ok();
  };
  return lanes;
}

}  // namespace loom
