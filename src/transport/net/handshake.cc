#include "transport/net/handshake.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include "base/clock.h"

namespace loom::net {

namespace {
constexpr uint64_t kConnectRetryNs = 20'000'000;
}

uint64_t randomNonZero64() {
  std::random_device random;
  uint64_t v = 0;
  while (v == 0) v = (uint64_t{random()} << 32) ^ random();
  return v;
}

Status acceptWaiting(const Socket& listener, const char* who, const std::function<void(Socket)>& take) {
  for (;;) {
    const int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      take(Socket(fd));
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) return Status::Ok();
    return systemError("{}: accept: {}", who, std::strerror(errno));
  }
}

Status NonBlockingConnect::step(const SocketAddress& to, const std::function<void(int fd)>& tune, bool* connected) {
  *connected = connected_;
  if (connected_) return Status::Ok();
  if (!socket_.valid()) {
    if (nowNs() < retryAtNs_) return Status::Ok();
    Socket fresh(::socket(to.family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fresh.valid()) return systemError("socket: {}", std::strerror(errno));
    if (tune) tune(fresh.fd());
    socklen_t len = 0;
    sockaddr_storage ss = to.toSockaddr(&len);
    if (::connect(fresh.fd(), reinterpret_cast<sockaddr*>(&ss), len) != 0 && errno != EINPROGRESS)
      return errorStatus(loomRemoteError, "connect to {}: {}", to.toString(), std::strerror(errno));
    socket_ = std::move(fresh);
  }
  pollfd p{socket_.fd(), POLLOUT, 0};
  if (::poll(&p, 1, 0) <= 0) return Status::Ok();
  int err = 0;
  socklen_t len = sizeof err;
  getsockopt(socket_.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
  if (err == ECONNREFUSED || err == ETIMEDOUT || err == ECONNRESET || err == EHOSTUNREACH || err == ENETUNREACH) {
    socket_.close();
    retryAtNs_ = nowNs() + kConnectRetryNs;
    return Status::Ok();
  }
  if (err != 0) return errorStatus(loomRemoteError, "connect to {}: {}", to.toString(), std::strerror(err));
  connected_ = *connected = true;
  return Status::Ok();
}

void Exchange::queue(const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  out_.insert(out_.end(), p, p + bytes);
}

Status Exchange::flushOut(bool* done) {
  while (sent_ < out_.size()) {
    const ssize_t w = ::send(socket_.fd(), out_.data() + sent_, out_.size() - sent_, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      sent_ += static_cast<size_t>(w);
    } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      *done = false;
      return Status::Ok();
    } else {
      return errorStatus(loomRemoteError, "{}: send: {}", who_, std::strerror(errno));
    }
  }
  *done = true;
  return Status::Ok();
}

Status Exchange::readUpTo(size_t bytes, bool* done) {
  while (in_.size() < bytes) {
    char chunk[4096];
    const ssize_t r = ::recv(socket_.fd(), chunk, std::min(sizeof chunk, bytes - in_.size()), MSG_DONTWAIT);
    if (r > 0) {
      in_.insert(in_.end(), chunk, chunk + r);
    } else if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      *done = false;
      return Status::Ok();
    } else {
      return errorStatus(loomRemoteError, "{}: {}", who_, r == 0 ? "closed by the peer" : std::strerror(errno));
    }
  }
  *done = true;
  return Status::Ok();
}

}  // namespace loom::net
