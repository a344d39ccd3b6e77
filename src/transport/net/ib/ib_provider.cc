#include "transport/net/ib/ib_provider.h"

#include <cstring>

#include "base/log.h"
#include "transport/net/ib/ib_handshake.h"
#include "transport/net/ib/verbs_api.h"

namespace loom::net::ib {

Status IbProvider::create(const std::string& interfaceSpec, std::unique_ptr<Provider>* out) {
  std::unique_ptr<IbProvider> p(new IbProvider());
  LOOM_TRY(readIbConfig(&p->config_));
  std::shared_ptr<const VerbsApi> api;
  LOOM_TRY(loadVerbs(&api));
  std::string report;
  LOOM_TRY(discoverPorts(api, p->config_, &p->ports_, &report));
  if (p->ports_.empty()) return systemError("no usable RDMA port ({}; loaded {})", report, api->path);
  std::vector<NetworkInterface> nics;
  LOOM_TRY(listInterfaces(interfaceSpec, &nics));
  if (nics.empty())
    return systemError("ib: no network interface matches '{}' for the connection side channel", interfaceSpec);
  p->sideChannel_ = nics.front().address;
  LOOM_INFO(Net, "ib: {} port(s) usable, side channel on {} ({}){}", p->ports_.size(), nics.front().name,
            p->sideChannel_.toString(), report.empty() ? "" : "; left out: " + report);
  *out = std::move(p);
  return Status::Ok();
}

IbProvider::~IbProvider() = default;

Status IbProvider::deviceProperties(int device, DeviceProperties* out) const {
  if (device < 0 || device >= deviceCount()) return invalidArgument("ib provider: no device {}", device);
  *out = ports_[static_cast<size_t>(device)].props;
  return Status::Ok();
}

Status IbProvider::listen(int device, Handle* handle, std::unique_ptr<ListenComm>* out) {
  if (device < 0 || device >= deviceCount()) return invalidArgument("ib provider: no device {}", device);
  return IbListenComm::create(ports_[static_cast<size_t>(device)], config_, sideChannel_, handle, out);
}

Status IbProvider::connect(int device, Handle* handle, std::unique_ptr<SendComm>* out) {
  out->reset();
  if (device < 0 || device >= deviceCount()) return invalidArgument("ib provider: no device {}", device);
  IbHandle h;
  std::memcpy(&h, handle->bytes.data(), sizeof h);
  if (h.magic != kHandleMagic || h.version != kVersion)
    return invalidArgument("not a handle of this ib provider (magic {:#x}, version {})", h.magic, h.version);
  if (h.connectId == 0) {
    h.connectId = nextConnectId_++;
    std::memcpy(handle->bytes.data(), &h, sizeof h);
    connecting_[h.connectId] = std::make_unique<IbConnector>(ports_[static_cast<size_t>(device)], config_, h);
  }
  auto it = connecting_.find(h.connectId);
  if (it == connecting_.end()) return invalidArgument("handle of a connection this provider did not start");
  Status st = it->second->step(out);
  if (!st.ok() || *out) connecting_.erase(it);
  return st;
}

}  // namespace loom::net::ib
