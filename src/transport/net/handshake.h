// What the providers' connection handshakes share (socket/, ucx/): random secrets, taking every
// connection a listener holds, and a TCP connect that never blocks and retries while the peer's
// listener cannot be reached yet.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "base/socket.h"
#include "base/status.h"

namespace loom::net {

// Strangers (scanners, junk) that connect to a listener and say nothing are kept only this many at
// a time, the oldest dropped first.
inline constexpr size_t kMaxPendingStrangers = 64;

uint64_t randomNonZero64();

// Accepts every connection waiting on `listener`, as non-blocking sockets, and hands each to `take`.
Status acceptWaiting(const Socket& listener, const char* who, const std::function<void(Socket)>& take);

class NonBlockingConnect {
 public:
  // *connected once the connection to `to` is up. A refused or unreachable attempt is retried a
  // little later: the caller's deadline bounds the retries. `tune` sees each new socket before it
  // connects (buffer sizes must be set before the handshake).
  Status step(const SocketAddress& to, const std::function<void(int fd)>& tune, bool* connected);
  Socket& socket() { return socket_; }

 private:
  Socket socket_;
  bool connected_ = false;
  uint64_t retryAtNs_ = 0;
};

}  // namespace loom::net
