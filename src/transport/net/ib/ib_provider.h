// The ib provider: InfiniBand and RoCE verbs (README.md). Its devices are the ACTIVE ports that
// LOOM_IB_HCA lets through (ib_devices.h); connections are reliable-connection QPs set up over a TCP
// side channel (ib_handshake.h) on the interface the device spec (LOOM_SOCKET_IFNAME) chooses, and
// carry messages with NCCL's receiver-driven protocol (ib_comms.h).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/socket.h"
#include "transport/net/ib/ib_config.h"
#include "transport/net/ib/ib_devices.h"
#include "transport/net/provider.h"

namespace loom::net::ib {

class IbConnector;

class IbProvider final : public Provider {
 public:
  // Fails, saying why, when libibverbs cannot be loaded or no port is usable.
  static Status create(const std::string& interfaceSpec, std::unique_ptr<Provider>* out);
  ~IbProvider() override;

  const std::string& name() const override { return name_; }
  int deviceCount() const override { return static_cast<int>(ports_.size()); }
  Status deviceProperties(int device, DeviceProperties* out) const override;
  Status listen(int device, Handle* handle, std::unique_ptr<ListenComm>* out) override;
  Status connect(int device, Handle* handle, std::unique_ptr<SendComm>* out) override;
  bool interfaceNamedDevices() const override { return false; }

 private:
  IbProvider() = default;
  std::string name_ = "ib";
  IbConfig config_;
  std::vector<IbPort> ports_;
  SocketAddress sideChannel_;
  std::unordered_map<uint64_t, std::unique_ptr<IbConnector>> connecting_;
  uint64_t nextConnectId_ = 1;
};

}  // namespace loom::net::ib
