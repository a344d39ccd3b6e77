#include "transport/net/ucx/ucx_provider.h"

#include <cstdlib>
#include <cstring>

#include "base/env.h"
#include "base/log.h"
#include "transport/net/ucx/ucx_comms.h"
#include "transport/net/ucx/ucx_handshake.h"

namespace loom::net::ucx {

Status UcxProvider::create(const std::string& deviceSpec, std::unique_ptr<Provider>* out, bool* reachesRdma) {
  std::unique_ptr<UcxProvider> p(new UcxProvider());
  std::vector<NetworkInterface> nics;
  LOOM_TRY(listInterfaces(deviceSpec, &nics));
  if (nics.empty()) return systemError("ucx: no network interface matches '{}' for the handshake", deviceSpec);
  p->outOfBand_ = nics.front().address;
  std::string pinned;
  const std::string userDevices = envString("UCX_NET_DEVICES", "");
  if (userDevices.empty() && !deviceSpec.empty())
    for (const NetworkInterface& nic : nics) pinned += (pinned.empty() ? "" : ",") + nic.name;
  p->deviceName_ = !userDevices.empty() ? userDevices : !pinned.empty() ? pinned : "all";
  LOOM_TRY(UcxWorker::create(pinned, &p->worker_));
  *reachesRdma = ucxReachesRdma();
  LOOM_INFO(Net, "ucx: worker up (UCX_TLS={}, devices {}), {}", envString("UCX_TLS", "(all)"), p->deviceName_,
            *reachesRdma ? "an RDMA transport is reachable" : "TCP only");
  *out = std::move(p);
  return Status::Ok();
}

UcxProvider::~UcxProvider() = default;

Status UcxProvider::deviceProperties(int device, DeviceProperties* out) const {
  if (device != 0) return invalidArgument("ucx provider: no device {}", device);
  DeviceProperties p;
  p.name = deviceName_;
  p.ptrSupport = kHostPointers;  // Debian's UCX has no CUDA transports
  p.regIsGlobal = true;
  p.hostNeedsRegistration = false;
  p.speedMbps = 10000;
  p.maxComms = 65536;
  p.maxRecvs = 1;
  *out = p;
  return Status::Ok();
}

void UcxProvider::progress() { worker_->progress(); }

Status UcxProvider::listen(int device, Handle* handle, std::unique_ptr<ListenComm>* out) {
  if (device != 0) return invalidArgument("ucx provider: no device {}", device);
  return UcxListenComm::create(worker_, outOfBand_, handle, out);
}

Status UcxProvider::connect(int device, Handle* handle, std::unique_ptr<SendComm>* out) {
  (void)device;
  out->reset();
  UcxHandle h;
  std::memcpy(&h, handle->bytes.data(), sizeof h);
  if (h.magic != kHandleMagic || h.version != kVersion)
    return invalidArgument("not a handle of this ucx provider (magic {:#x}, version {})", h.magic, h.version);
  if (h.connectId == 0) {
    h.connectId = nextConnectId_++;
    std::memcpy(handle->bytes.data(), &h, sizeof h);
    connecting_[h.connectId] = std::make_unique<UcxConnector>(worker_, h);
  }
  auto it = connecting_.find(h.connectId);
  if (it == connecting_.end()) return invalidArgument("handle of a connection this provider did not start");
  Status st = it->second->step(out);
  if (!st.ok() || *out) connecting_.erase(it);
  return st;
}

}  // namespace loom::net::ucx
