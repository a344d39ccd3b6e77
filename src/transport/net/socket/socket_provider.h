// The socket provider: TCP with NCCL's design (socket_link.h). Devices are the host's network
// interfaces that are up (loopback last). Settings, read when the provider is made:
//   LOOM_SOCKET_NTHREADS   helper threads per provider (0..16; default 0: the driving thread moves
//                          everything, which is best where ranks have no core to spare)
//   LOOM_NSOCKS_PERTHREAD  data streams per helper thread (or in all, without helpers) and connection
//                          (1..64; threads x socks <= 64; default 1)
//   LOOM_SOCKET_INLINE     messages up to this size travel on the control stream
//   LOOM_SOCKET_BUFFER     SO_SNDBUF/SO_RCVBUF of every stream (0: the kernel's autotuning)
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/socket.h"
#include "transport/net/provider.h"
#include "transport/net/socket/socket_handshake.h"

namespace loom::net::socket {

Status readSocketConfig(SocketConfig* out);

class SocketProvider final : public Provider {
 public:
  static Status create(const SocketConfig& config, std::unique_ptr<Provider>* out);
  ~SocketProvider() override;

  const std::string& name() const override { return name_; }
  int deviceCount() const override { return static_cast<int>(devices_.size()); }
  Status deviceProperties(int device, DeviceProperties* out) const override;
  Status listen(int device, Handle* handle, std::unique_ptr<ListenComm>* out) override;
  Status connect(int device, Handle* handle, std::unique_ptr<SendComm>* out) override;
  void pairComms(SendComm& send, RecvComm& recv) override;

 private:
  SocketProvider() = default;

  std::string name_ = "socket";
  std::shared_ptr<SocketShared> shared_;
  std::vector<NetworkInterface> devices_;
  std::unordered_map<uint64_t, std::unique_ptr<SocketConnector>> connecting_;  // by SocketHandle::connectId
  uint64_t nextConnectId_ = 1;
};

}  // namespace loom::net::socket
