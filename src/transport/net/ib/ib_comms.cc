#include "transport/net/ib/ib_comms.h"

#include <cerrno>
#include <cstring>

namespace loom::net::ib {

OwnedRegion::~OwnedRegion() {
  if (mr_) api_->deregMr(mr_);
}

Status OwnedRegion::registerOn(IbDevice& device, void* data, size_t bytes, int access) {
  api_ = &device.api();
  errno = 0;
  mr_ = api_->regMr(device.pd(), data, bytes, access);
  if (!mr_) return registrationError(errno ? errno : ENOMEM, data, bytes);
  return Status::Ok();
}

template <typename Base>
Status IbComm<Base>::registerMemory(void* data, size_t bytes, int pointerKind, MemoryRegion** region) {
  IbDevice& device = endpoint_->device();
  if (pointerKind == kCudaPointers && !device.gpuMemory().peermem)
    return invalidArgument("ib: {} cannot register CUDA memory with ibv_reg_mr ({}): load nvidia-peermem, or register "
                           "the memory as a dmabuf",
                           device.name(), device.gpuMemory().why);
  if (pointerKind != kHostPointers && pointerKind != kCudaPointers)
    return invalidArgument("ib: pointer kind {} is registered with registerDmabuf", pointerKind);
  Registration* r = nullptr;
  LOOM_TRY(device.registry().acquire(data, bytes, &r, /*gpu=*/pointerKind == kCudaPointers));
  *region = reinterpret_cast<MemoryRegion*>(r);
  return Status::Ok();
}

template <typename Base>
Status IbComm<Base>::registerDmabuf(void* data, size_t bytes, int fd, uint64_t offset, MemoryRegion** region) {
  IbDevice& device = endpoint_->device();
  if (!device.gpuMemory().dmabuf)
    return invalidArgument("ib: {} does not register dmabuf memory ({})", device.name(), device.gpuMemory().why);
  Registration* r = nullptr;
  LOOM_TRY(device.registry().acquireDmabuf(data, bytes, fd, offset, &r));
  *region = reinterpret_cast<MemoryRegion*>(r);
  return Status::Ok();
}

template <typename Base>
Status IbComm<Base>::deregisterMemory(MemoryRegion* region) {
  endpoint_->device().registry().release(reinterpret_cast<Registration*>(region));
  return Status::Ok();
}

template <typename Base>
Status IbComm<Base>::registrationFor(MemoryRegion* given, const void* data, size_t bytes, Registration** use,
                                     Registration** own) {
  *own = nullptr;
  auto* r = reinterpret_cast<Registration*>(given);
  if (r && r->covers(data, bytes)) {
    *use = r;
    return Status::Ok();
  }
  LOOM_TRY(endpoint_->device().registry().acquire(const_cast<void*>(data), bytes, own));
  *use = *own;
  return Status::Ok();
}

template <typename Base>
void IbComm<Base>::addWaits(WaitList* waits) {
  // Completions that are already there, or errors, are the caller's to see now; otherwise ask for an
  // event and look once more, since a completion between the last look and the request raises none.
  if (!progress().ok() || somethingToReport() || !arm().ok() || !progress().ok() || somethingToReport()) {
    waits->capSleep(0);
    return;
  }
  endpoint_->addWaits(waits);
  addMoreWaits(waits);
}

template class IbComm<SendComm>;
template class IbComm<RecvComm>;

}  // namespace loom::net::ib
