// Setting up an ib connection over a TCP side channel, as NCCL's net_ib does, without blocking. The
// 128-byte handle carries the receiver's side-channel address and a secret. Then:
//   sender -> receiver  hello: the secret, its port address (GID, LID, MTU), its FIFO's address and
//                       rkey, its QP numbers
//   receiver            makes as many QPs as the larger of the two sides asks for, connects them
//   receiver -> sender  its port address and QP numbers
//   sender              makes the QPs it lacks, connects all (RTR, RTS), posts its receives
//   sender -> receiver  ready: every QP number; the receiver connects its QPs and the comm is up
// The receiver writes nothing before "ready", so nothing reaches a QP that is not ready to receive.
// The side channel then stays open: its end tells either side that the other is gone.
// Strangers at the port and forged hellos are dropped with a warning.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "base/socket.h"
#include "transport/net/handshake.h"
#include "transport/net/ib/ib_comms.h"
#include "transport/net/ib/ib_config.h"
#include "transport/net/ib/ib_devices.h"
#include "transport/net/provider.h"

namespace loom::net::ib {

inline constexpr uint32_t kHandleMagic = 0x4249424c;  // "LBIB"
inline constexpr uint32_t kHelloMagic = 0x4f4c4849;   // "IHLO"
inline constexpr uint32_t kVersion = 1;

struct IbHandle {
  uint32_t magic = kHandleMagic;
  uint32_t version = kVersion;
  SocketAddress sideChannel;
  uint64_t secret = 0;
  uint64_t connectId = 0;  // the sender's progress; 0: not started
};
static_assert(sizeof(IbHandle) <= kHandleBytes);

// Each message of the exchange: this header, then `qps` QP numbers (uint32).
struct SetupMessage {
  uint32_t magic = kHelloMagic;
  uint32_t version = kVersion;
  uint64_t secret = 0;
  PortAddress address;
  uint64_t fifoAddress = 0;  // the sender's hello only
  uint32_t fifoRkey = 0;
  uint32_t qps = 0;
};

class IbListenComm final : public ListenComm {
 public:
  static Status create(const IbPort& port, const IbConfig& config, const SocketAddress& bindAddress, Handle* handle,
                       std::unique_ptr<ListenComm>* out);
  Status accept(std::unique_ptr<RecvComm>* out) override;

 private:
  IbListenComm(const IbPort& port, const IbConfig& config) : port_(port), config_(config) {}
  // Reads one stranger's hello; *keep false once it is dropped; *taken once all of the sender's arrived.
  void readHello(Exchange& e, bool* keep, bool* taken);
  Status answer(Exchange& sender);

  IbPort port_;
  IbConfig config_;
  Socket listener_;
  uint64_t secret_ = 0;
  std::deque<Exchange> pending_;
  std::unique_ptr<Exchange> sender_;  // introduced; answered or being answered
  std::unique_ptr<IbRecvComm> comm_;  // its QPs made, waiting for "ready"
};

class IbConnector {
 public:
  IbConnector(const IbPort& port, const IbConfig& config, const IbHandle& handle)
      : port_(port), config_(config), handle_(handle) {}
  Status step(std::unique_ptr<SendComm>* out);

 private:
  IbPort port_;
  IbConfig config_;
  IbHandle handle_;
  std::unique_ptr<IbSendComm> comm_;
  NonBlockingConnect connect_;
  std::unique_ptr<Exchange> exchange_;
  bool ready_ = false;  // "ready" queued
};

}  // namespace loom::net::ib
