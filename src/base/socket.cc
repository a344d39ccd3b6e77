#include "base/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "base/settings.h"
#include "base/log.h"

namespace loom {

sockaddr_storage SocketAddress::toSockaddr(socklen_t* len) const {
  sockaddr_storage ss{};
  if (family == AF_INET6) {
    auto* sa = reinterpret_cast<sockaddr_in6*>(&ss);
    sa->sin6_family = AF_INET6;
    sa->sin6_port = htons(port);
    std::memcpy(&sa->sin6_addr, addr, 16);
    *len = sizeof(sockaddr_in6);
  } else {
    auto* sa = reinterpret_cast<sockaddr_in*>(&ss);
    sa->sin_family = AF_INET;
    sa->sin_port = htons(port);
    std::memcpy(&sa->sin_addr, addr, 4);
    *len = sizeof(sockaddr_in);
  }
  return ss;
}

SocketAddress SocketAddress::fromSockaddr(const sockaddr* sa) {
  SocketAddress a;
  if (sa->sa_family == AF_INET6) {
    auto* s6 = reinterpret_cast<const sockaddr_in6*>(sa);
    a.family = AF_INET6;
    a.port = ntohs(s6->sin6_port);
    std::memcpy(a.addr, &s6->sin6_addr, 16);
  } else if (sa->sa_family == AF_INET) {
    auto* s4 = reinterpret_cast<const sockaddr_in*>(sa);
    a.family = AF_INET;
    a.port = ntohs(s4->sin_port);
    std::memcpy(a.addr, &s4->sin_addr, 4);
  }
  return a;
}

std::string SocketAddress::toString() const {
  char text[INET6_ADDRSTRLEN] = "?";
  inet_ntop(family == AF_INET6 ? AF_INET6 : AF_INET, addr, text, sizeof(text));
  return family == AF_INET6 ? fmt::format("[{}]:{}", text, port) : fmt::format("{}:{}", text, port);
}

Status parseSocketAddress(const std::string& text, SocketAddress* out) {
  std::string host, port;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return invalidArgument("bad address '{}': expected [v6addr]:port", text);
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos) return invalidArgument("bad address '{}': expected host:port", text);
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &result);
  if (rc != 0 || result == nullptr)
    return invalidArgument("cannot resolve '{}': {}", text, gai_strerror(rc));
  *out = SocketAddress::fromSockaddr(result->ai_addr);
  freeaddrinfo(result);
  return Status::Ok();
}

bool interfaceMatches(const std::string& spec, const char* name) {
  if (spec.empty()) return true;
  std::string list = spec;
  bool exclude = false, exact = false;
  if (!list.empty() && list[0] == '^') exclude = true, list.erase(0, 1);
  if (!list.empty() && list[0] == '=') exact = true, list.erase(0, 1);
  bool found = false;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) {
      if (exact ? item == name : std::strncmp(name, item.c_str(), item.size()) == 0) found = true;
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return exclude ? !found : found;
}

Status listInterfaces(const std::string& spec, std::vector<NetworkInterface>* out) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return systemError("getifaddrs: {}", std::strerror(errno));
  std::vector<NetworkInterface> found, loopbacks;
  for (ifaddrs* ifa = list; ifa; ifa = ifa->ifa_next) {
    if (!ifa->ifa_addr || !(ifa->ifa_flags & IFF_UP)) continue;
    int family = ifa->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    if (family == AF_INET6) {
      auto* s6 = reinterpret_cast<sockaddr_in6*>(ifa->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr)) continue;  // needs a scope id; not worth it
    }
    if (!interfaceMatches(spec, ifa->ifa_name)) continue;
    NetworkInterface nic{ifa->ifa_name, SocketAddress::fromSockaddr(ifa->ifa_addr), (ifa->ifa_flags & IFF_LOOPBACK) != 0};
    std::vector<NetworkInterface>& into = nic.loopback && spec.empty() ? loopbacks : found;
    auto same = std::find_if(into.begin(), into.end(), [&](const NetworkInterface& n) { return n.name == nic.name; });
    if (same == into.end())
      into.push_back(nic);
    else if (same->address.family == AF_INET6 && family == AF_INET)  // IPv4 first: what most clusters route
      *same = nic;
  }
  freeifaddrs(list);
  // Prefer IPv4 interfaces among equals, keeping the system's order otherwise.
  std::stable_sort(found.begin(), found.end(), [](const NetworkInterface& a, const NetworkInterface& b) {
    return a.address.family == AF_INET && b.address.family == AF_INET6;
  });
  if (found.empty()) found = loopbacks;
  *out = std::move(found);
  return Status::Ok();
}

Status chooseLocalAddress(SocketAddress* out) {
  std::string spec = settingText(Setting::SocketIfname);
  std::vector<NetworkInterface> nics;
  LOOM_TRY(listInterfaces(spec, &nics));
  if (nics.empty())
    return systemError("no usable network interface{}", spec.empty() ? "" : " matching LOOM_SOCKET_IFNAME=" + spec);
  *out = nics.front().address;
  out->port = 0;
  return Status::Ok();
}

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.release();
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Status Socket::setNonBlocking(bool on) {
  int flags = fcntl(fd_, F_GETFL, 0);
  if (flags < 0 || fcntl(fd_, F_SETFL, on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK)) < 0)
    return systemError("fcntl: {}", std::strerror(errno));
  return Status::Ok();
}

namespace {

constexpr int kPollSliceMs = 50;  // how often a blocked transfer looks at the abort flag

Status waitFd(int fd, short events, Deadline deadline, const AbortFlag* abort, const char* what) {
  for (;;) {
    if (abort && abort->load(std::memory_order_relaxed)) return errorStatus(loomRemoteError, "{}: aborted", what);
    if (deadline.expired()) return errorStatus(loomTimeout, "{}: timed out", what);
    pollfd p{fd, events, 0};
    // Without an abort flag nothing needs a look between wake-ups: one wait to the deadline (a slice
    // would wake thousands of waiting rank threads 20 times a second: perf/bootstrap_scale).
    int rc = ::poll(&p, 1, deadline.remainingMs(abort ? kPollSliceMs : kPollSliceMs * 20));
    if (rc > 0) return Status::Ok();
    if (rc < 0 && errno != EINTR) return systemError("{}: poll: {}", what, std::strerror(errno));
  }
}

void tuneSocket(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

Status listenOn(const SocketAddress& bindAddr, Socket* listener, SocketAddress* boundAddr) {
  Socket s(::socket(bindAddr.family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) return systemError("socket: {}", std::strerror(errno));
  int one = 1;
  setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  socklen_t len = 0;
  sockaddr_storage ss = bindAddr.toSockaddr(&len);
  if (::bind(s.fd(), reinterpret_cast<sockaddr*>(&ss), len) != 0)
    return systemError("bind {}: {}", bindAddr.toString(), std::strerror(errno));
  if (::listen(s.fd(), SOMAXCONN) != 0) return systemError("listen: {}", std::strerror(errno));
  len = sizeof(ss);
  getsockname(s.fd(), reinterpret_cast<sockaddr*>(&ss), &len);
  *boundAddr = SocketAddress::fromSockaddr(reinterpret_cast<sockaddr*>(&ss));
  LOOM_TRY(s.setNonBlocking(true));
  *listener = std::move(s);
  return Status::Ok();
}

Status connectTo(const SocketAddress& addr, Deadline deadline, const AbortFlag* abort, Socket* out, bool retryRefused) {
  int backoffMs = 1;
  for (;;) {
    Socket s(::socket(addr.family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!s.valid()) return systemError("socket: {}", std::strerror(errno));
    LOOM_TRY(s.setNonBlocking(true));
    socklen_t len = 0;
    sockaddr_storage ss = addr.toSockaddr(&len);
    int rc = ::connect(s.fd(), reinterpret_cast<sockaddr*>(&ss), len);
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      LOOM_TRY(waitFd(s.fd(), POLLOUT, deadline, abort, "connect"));
      socklen_t errLen = sizeof(err);
      getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &errLen);
    }
    if (err == 0) {
      tuneSocket(s.fd());
      *out = std::move(s);
      return Status::Ok();
    }
    // The listener may not be up yet (ranks start at different times): retry until the deadline.
    if ((err != ECONNREFUSED && err != ETIMEDOUT && err != ECONNRESET && err != EAGAIN) ||
        (err == ECONNREFUSED && !retryRefused))
      return systemError("connect to {}: {}", addr.toString(), std::strerror(err));
    if (abort && abort->load()) return errorStatus(loomRemoteError, "connect to {}: aborted", addr.toString());
    if (deadline.expired())
      return errorStatus(loomTimeout, "connect to {}: {}", addr.toString(), std::strerror(err));
    ::usleep(static_cast<useconds_t>(backoffMs) * 1000);
    backoffMs = std::min(backoffMs * 2, 100);
  }
}

Status startConnect(const SocketAddress& addr, Socket* out) {
  Socket s(::socket(addr.family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) return systemError("socket: {}", std::strerror(errno));
  LOOM_TRY(s.setNonBlocking(true));
  socklen_t len = 0;
  sockaddr_storage ss = addr.toSockaddr(&len);
  if (::connect(s.fd(), reinterpret_cast<sockaddr*>(&ss), len) != 0 && errno != EINPROGRESS)
    return systemError("connect to {}: {}", addr.toString(), std::strerror(errno));
  *out = std::move(s);
  return Status::Ok();
}

Status connectOutcome(const Socket& s, const SocketAddress& addr) {
  int err = 0;
  socklen_t errLen = sizeof(err);
  if (getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &errLen) != 0) err = errno;
  if (err != 0) return systemError("connect to {}: {}", addr.toString(), std::strerror(err));
  tuneSocket(s.fd());
  return Status::Ok();
}

Status acceptOne(const Socket& listener, Deadline deadline, const AbortFlag* abort, Socket* out) {
  for (;;) {
    LOOM_TRY(waitFd(listener.fd(), POLLIN, deadline, abort, "accept"));
    int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      Socket s(fd);
      LOOM_TRY(s.setNonBlocking(true));
      tuneSocket(fd);
      *out = std::move(s);
      return Status::Ok();
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
      return systemError("accept: {}", std::strerror(errno));
  }
}

Status sendAll(const Socket& s, const void* data, size_t bytes, Deadline deadline, const AbortFlag* abort) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::send(s.fd(), p, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      LOOM_TRY(waitFd(s.fd(), POLLOUT, deadline, abort, "send"));
      continue;
    }
    return errorStatus(loomRemoteError, "send: {}", n < 0 ? std::strerror(errno) : "connection closed");
  }
  return Status::Ok();
}

Status recvAll(const Socket& s, void* data, size_t bytes, Deadline deadline, const AbortFlag* abort) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    ssize_t n = ::recv(s.fd(), p, bytes, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      LOOM_TRY(waitFd(s.fd(), POLLIN, deadline, abort, "recv"));
      continue;
    }
    return errorStatus(loomRemoteError, "recv: {}", n == 0 ? "connection closed by peer" : std::strerror(errno));
  }
  return Status::Ok();
}

Status sendSome(const Socket& s, const void* data, size_t bytes, size_t* moved) {
  *moved = 0;
  const ssize_t n = ::send(s.fd(), data, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n >= 0) {
    *moved = static_cast<size_t>(n);
    return Status::Ok();
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return Status::Ok();
  return errorStatus(loomRemoteError, "send: {}", std::strerror(errno));
}

Status recvSome(const Socket& s, void* data, size_t bytes, size_t* moved) {
  *moved = 0;
  const ssize_t n = ::recv(s.fd(), data, bytes, MSG_DONTWAIT);
  if (n > 0) {
    *moved = static_cast<size_t>(n);
    return Status::Ok();
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return Status::Ok();
  return errorStatus(loomRemoteError, "recv: {}", n == 0 ? "connection closed by peer" : std::strerror(errno));
}

Status waitReady(const Socket& s, short events, Deadline deadline, const char* what) {
  return waitFd(s.fd(), events, deadline, nullptr, what);
}

}  // namespace loom
