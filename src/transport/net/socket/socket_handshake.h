// How a socket connection is made, without blocking. The receiver listens on a port of its device and
// puts (address, a random secret, the stream count) in the handle; the sender opens the control
// stream and the data streams to it, and each starts with a Hello proving the secret and saying
// which stream it is. Anything else that reaches the port (a scanner, junk, a forged or stale hello)
// is dropped with a warning and does not disturb the connection being made.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "base/socket.h"
#include "transport/net/handshake.h"
#include "transport/net/provider.h"
#include "transport/net/socket/socket_link.h"

namespace loom::net::socket {

inline constexpr uint32_t kHandleMagic = 0x4b4f534c;  // "LSOK"
inline constexpr uint32_t kHelloMagic = 0x4f4c4548;   // "HELO"
inline constexpr uint32_t kProtocolVersion = 2;
inline constexpr uint32_t kControlIndex = 0xffffffffu;

struct SocketHandle {
  uint32_t magic = kHandleMagic;
  uint32_t version = kProtocolVersion;
  SocketAddress address;
  uint32_t nstreams = 0;
  uint64_t secret = 0;
  uint64_t connectId = 0;  // the sender's progress (its provider's id for the connect under way); 0: none yet
  uint64_t instance = 0;   // the receiver's provider instance
};
static_assert(sizeof(SocketHandle) <= kHandleBytes);

struct Hello {
  uint32_t magic = kHelloMagic;
  uint32_t version = kProtocolVersion;
  uint64_t secret = 0;
  uint32_t index = 0;  // kControlIndex or the data stream's index
  uint32_t nstreams = 0;
  uint64_t instance = 0;  // the sender's provider instance
};

// Pure, so that the tests can feed it anything: why `bytes` is not a hello for this listener, or "".
std::string rejectHello(const Hello& hello, uint64_t secret, uint32_t nstreams);

void tuneStream(int fd, const SocketConfig& config);

class SocketListenComm final : public ListenComm {
 public:
  static Status create(std::shared_ptr<SocketShared> shared, const SocketAddress& bindAddress, Handle* handle,
                       std::unique_ptr<ListenComm>* out);
  Status accept(std::unique_ptr<RecvComm>* out) override;

 private:
  struct Pending {
    Socket socket;
    Hello hello;
    size_t got = 0;
  };
  SocketListenComm() = default;
  // Reads what the pending socket sent; *keep false once it was taken or dropped.
  void readHello(Pending& p, bool* keep);

  std::shared_ptr<SocketShared> shared_;
  Socket listener_;
  uint64_t secret_ = 0;
  uint32_t nstreams_ = 0;
  std::deque<Pending> pending_;
  uint64_t peerInstance_ = 0;
  Socket control_;
  std::vector<Socket> streams_;
  size_t assigned_ = 0;
};

// The sender's side of one connection under way.
class SocketConnector {
 public:
  SocketConnector(std::shared_ptr<SocketShared> shared, const SocketHandle& handle);
  // *done once every stream is connected and introduced.
  Status step(bool* done);
  std::unique_ptr<SendComm> finish();

 private:
  struct Stream {
    NonBlockingConnect connect;
    Hello hello;
    size_t sent = 0;
  };
  Status stepStream(Stream& s, bool* done);

  std::shared_ptr<SocketShared> shared_;
  SocketHandle handle_;
  std::vector<Stream> streams_;  // [0] is the control stream
};

}  // namespace loom::net::socket
