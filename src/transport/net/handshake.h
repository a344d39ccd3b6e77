// What the providers' connection handshakes share (socket/, ucx/, ib/): random secrets, taking every
// connection a listener holds, a TCP connect that never blocks and retries while the peer's listener
// cannot be reached yet, and bytes moved both ways over a non-blocking socket.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

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

// Bytes moved over one non-blocking socket: what is still to write, and what is still to read.
class Exchange {
 public:
  // `who` names the handshake in errors ("ucx handshake").
  Exchange(Socket socket, const char* who) : socket_(std::move(socket)), who_(who) {}
  Socket& socket() { return socket_; }
  void queue(const void* data, size_t bytes);
  // *done once everything queued left.
  Status flushOut(bool* done);
  // *done once `bytes` (in all) arrived; they are in received().
  Status readUpTo(size_t bytes, bool* done);
  const std::vector<char>& received() const { return in_; }

 private:
  Socket socket_;
  const char* who_;
  std::vector<char> out_, in_;
  size_t sent_ = 0;
};

}  // namespace loom::net
