// The ucx provider: UCP's tag API. A connection is made out of band over TCP, as NCCL's UCX plugin
// does (UCX worker addresses do not fit a 128-byte handle): the receiver listens on a TCP port, the
// sender connects and sends its worker address after the handle's secret, the receiver answers with
// its own; then each side makes an endpoint to the other and the TCP connection is closed.
// One device: UCX chooses its transports and NICs itself (UCX_TLS, UCX_NET_DEVICES); the device is named
// after the NET_DEVICES it was given ("all" when UCX chooses).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include "base/socket.h"
#include "transport/net/provider.h"
#include "transport/net/ucx/ucx_worker.h"

namespace loom::net::ucx {

class UcxConnector;

class UcxProvider final : public Provider {
 public:
  // `deviceSpec` (LOOM_SOCKET_IFNAME syntax) pins UCX_NET_DEVICES to the interfaces it matches when the
  // user did not set UCX_NET_DEVICES. *reachesRdma: UCX sees a network transport other than TCP.
  static Status create(const std::string& deviceSpec, std::unique_ptr<Provider>* out, bool* reachesRdma);
  ~UcxProvider() override;

  const std::string& name() const override { return name_; }
  int deviceCount() const override { return 1; }
  Status deviceProperties(int device, DeviceProperties* out) const override;
  Status listen(int device, Handle* handle, std::unique_ptr<ListenComm>* out) override;
  Status connect(int device, Handle* handle, std::unique_ptr<SendComm>* out) override;
  void progress() override;

 private:
  UcxProvider() = default;
  std::string name_ = "ucx";
  std::string deviceName_;
  SocketAddress outOfBand_;  // where the handshake listens
  std::shared_ptr<UcxWorker> worker_;
  std::unordered_map<uint64_t, std::unique_ptr<UcxConnector>> connecting_;
  uint64_t nextConnectId_ = 1;
};

}  // namespace loom::net::ucx
