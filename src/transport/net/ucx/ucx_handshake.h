// The ucx provider's out-of-band handshake (ucx_provider.h), without blocking: the receiver's listen
// comm takes a sender's hello (the handle's secret and its worker address) and answers with its own
// address; strangers and forged hellos are dropped with a warning.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "base/socket.h"
#include "transport/net/handshake.h"
#include "transport/net/provider.h"
#include "transport/net/ucx/ucx_worker.h"

namespace loom::net::ucx {

inline constexpr uint32_t kHandleMagic = 0x58435555;  // "UUCX"
inline constexpr uint32_t kHelloMagic = 0x4f4c4855;   // "UHLO"
inline constexpr uint32_t kVersion = 1;
inline constexpr uint32_t kMaxAddressBytes = 64 << 10;

struct UcxHandle {
  uint32_t magic = kHandleMagic;
  uint32_t version = kVersion;
  SocketAddress outOfBand;
  uint64_t secret = 0;
  uint64_t tag = 0;
  uint64_t connectId = 0;  // the sender's progress; 0: not started
};
static_assert(sizeof(UcxHandle) <= kHandleBytes);

struct UcxHello {
  uint32_t magic = kHelloMagic;
  uint32_t version = kVersion;
  uint64_t secret = 0;
  uint32_t addressBytes = 0;
  uint32_t reserved = 0;
};

class UcxListenComm final : public ListenComm {
 public:
  static Status create(std::shared_ptr<UcxWorker> worker, const SocketAddress& bindAddress, Handle* handle,
                       std::unique_ptr<ListenComm>* out);
  Status accept(std::unique_ptr<RecvComm>* out) override;

 private:
  UcxListenComm() = default;
  // Moves one pending stranger on; *keep false once it is dropped; *taken when it is the sender.
  void step(Exchange& e, bool* keep, bool* taken);

  std::shared_ptr<UcxWorker> worker_;
  Socket listener_;
  uint64_t secret_ = 0, tag_ = 0;
  std::deque<Exchange> pending_;
  std::unique_ptr<Exchange> sender_;  // introduced; our answer is on its way
  std::vector<char> senderAddress_;
};

class UcxConnector {
 public:
  UcxConnector(std::shared_ptr<UcxWorker> worker, const UcxHandle& handle) : worker_(std::move(worker)), handle_(handle) {}
  Status step(std::unique_ptr<SendComm>* out);

 private:
  std::shared_ptr<UcxWorker> worker_;
  UcxHandle handle_;
  NonBlockingConnect connect_;
  std::unique_ptr<Exchange> exchange_;
};

}  // namespace loom::net::ucx
