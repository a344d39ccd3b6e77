// TCP sockets for the bootstrap and the socket transport: addresses, interface choice
// (LOOM_SOCKET_IFNAME, same syntax as NCCL_SOCKET_IFNAME), listen/connect/accept, blocking
// transfers that honour a deadline and an abort flag instead of waiting forever, and non-blocking
// ones for loops that poll many sockets.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"

namespace loom {

// An IPv4 or IPv6 endpoint, stored in a fixed 28-byte form so it can travel inside ids and messages.
struct SocketAddress {
  uint16_t family = 0;  // AF_INET or AF_INET6
  uint16_t port = 0;    // host byte order
  uint8_t addr[16] = {0};

  sockaddr_storage toSockaddr(socklen_t* len) const;
  static SocketAddress fromSockaddr(const sockaddr* sa);
  std::string toString() const;
  bool valid() const { return family == AF_INET || family == AF_INET6; }
};

// Parses "host:port" or "[v6]:port"; host may be a name resolved with getaddrinfo.
Status parseSocketAddress(const std::string& text, SocketAddress* out);

// NCCL_SOCKET_IFNAME syntax: "eth,ib" prefixes, "^docker" excludes, "=eth0" exact names; "" matches all.
bool interfaceMatches(const std::string& spec, const char* name);

struct NetworkInterface {
  std::string name;
  SocketAddress address;  // port 0
  bool loopback = false;
};

// Interfaces that are up with an address matching `spec` (interfaceMatches), best first: IPv4 before
// IPv6 of one interface, loopback last and only when `spec` is empty and nothing else is up, or when
// `spec` names it. IPv6 link-local addresses are left out (they need a scope id).
Status listInterfaces(const std::string& spec, std::vector<NetworkInterface>* out);

// The address this host advertises to peers: the first of listInterfaces(LOOM_SOCKET_IFNAME).
Status chooseLocalAddress(SocketAddress* out);

// An owned file descriptor.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& other) noexcept : fd_(other.release()) {}
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { close(); }

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void close();
  Status setNonBlocking(bool on);

 private:
  int fd_ = -1;
};

// Something that can stop a blocking transfer early (a communicator's abort flag).
using AbortFlag = std::atomic<bool>;

Status listenOn(const SocketAddress& bindAddr, Socket* listener, SocketAddress* boundAddr);
// A refused connection is retried until the deadline (the peer's listener may not be up yet) unless
// `retryRefused` is false (a listener that was up: refused means its process is gone).
Status connectTo(const SocketAddress& addr, Deadline deadline, const AbortFlag* abort, Socket* out,
                 bool retryRefused = true);
// A connection started without waiting for it (for loops that reach many peers at once): writable
// (poll POLLOUT) once it is up or failed; connectOutcome says which.
Status startConnect(const SocketAddress& addr, Socket* out);
Status connectOutcome(const Socket& s, const SocketAddress& addr);
// Waits for one incoming connection; loomTimeout / loomRemoteError(aborted) when it does not come.
Status acceptOne(const Socket& listener, Deadline deadline, const AbortFlag* abort, Socket* out);

// Blocking full transfers over a (possibly nonblocking) socket; a closed peer is loomRemoteError.
Status sendAll(const Socket& s, const void* data, size_t bytes, Deadline deadline, const AbortFlag* abort);
Status recvAll(const Socket& s, void* data, size_t bytes, Deadline deadline, const AbortFlag* abort);

// Transfers of what the socket takes or holds now, without waiting (for poll loops that serve many
// connections): *moved bytes, 0 when it would block; a closed peer is loomRemoteError.
Status sendSome(const Socket& s, const void* data, size_t bytes, size_t* moved);
Status recvSome(const Socket& s, void* data, size_t bytes, size_t* moved);
// Waits until `events` (POLLIN, POLLOUT) are ready on `s`; loomTimeout at the deadline.
Status waitReady(const Socket& s, short events, Deadline deadline, const char* what);

}  // namespace loom
