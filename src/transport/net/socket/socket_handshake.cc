#include "transport/net/socket/socket_handshake.h"

#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "base/log.h"
#include "transport/net/handshake.h"
#include "transport/net/socket/socket_comms.h"

namespace loom::net::socket {

namespace {

std::string peerName(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "an unknown peer";
  return SocketAddress::fromSockaddr(reinterpret_cast<sockaddr*>(&ss)).toString();
}

}  // namespace

std::string rejectHello(const Hello& hello, uint64_t secret, uint32_t nstreams) {
  if (hello.magic != kHelloMagic) return "not a Loom socket hello";
  if (hello.version != kProtocolVersion) return fmt::format("protocol version {} (expected {})", hello.version, kProtocolVersion);
  if (hello.secret != secret) return "wrong secret (a stale or foreign connection)";
  if (hello.nstreams != nstreams) return fmt::format("{} streams announced, {} expected", hello.nstreams, nstreams);
  if (hello.index != kControlIndex && hello.index >= nstreams) return fmt::format("stream index {} out of range", hello.index);
  return "";
}

void tuneStream(int fd, const SocketConfig& config) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (config.bufferBytes > 0) {
    int bytes = config.bufferBytes;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
  }
}

// ---- receiver ------------------------------------------------------------------------------------

Status SocketListenComm::create(std::shared_ptr<SocketShared> shared, const SocketAddress& bindAddress, Handle* handle,
                                std::unique_ptr<ListenComm>* out) {
  std::unique_ptr<SocketListenComm> l(new SocketListenComm());
  SocketHandle h;
  SocketAddress bind = bindAddress;
  bind.port = 0;
  LOOM_TRY(listenOn(bind, &l->listener_, &h.address));
  tuneStream(l->listener_.fd(), shared->config);  // accepted sockets inherit the buffer sizes
  l->shared_ = std::move(shared);
  l->secret_ = h.secret = randomNonZero64();
  h.instance = l->shared_->instance;
  l->nstreams_ = h.nstreams = static_cast<uint32_t>(l->shared_->config.streams());
  l->streams_.resize(l->nstreams_);
  handle->bytes.fill(0);
  std::memcpy(handle->bytes.data(), &h, sizeof h);
  *out = std::move(l);
  return Status::Ok();
}

void SocketListenComm::readHello(Pending& p, bool* keep) {
  *keep = true;
  while (p.got < sizeof p.hello) {
    const ssize_t r = ::recv(p.socket.fd(), reinterpret_cast<char*>(&p.hello) + p.got, sizeof p.hello - p.got, MSG_DONTWAIT);
    if (r > 0) {
      p.got += static_cast<size_t>(r);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    LOOM_WARN(Net, "socket provider: dropped a connection from {} that closed before its hello", peerName(p.socket.fd()));
    *keep = false;
    return;
  }
  *keep = false;
  std::string why = rejectHello(p.hello, secret_, nstreams_);
  Socket& slot = p.hello.index == kControlIndex ? control_ : streams_[why.empty() ? p.hello.index : 0];
  if (why.empty() && slot.valid()) why = "a second connection for one stream";
  if (!why.empty()) {
    LOOM_WARN(Net, "socket provider: dropped a connection from {}: {}", peerName(p.socket.fd()), why);
    return;
  }
  slot = std::move(p.socket);
  if (p.hello.index == kControlIndex) peerInstance_ = p.hello.instance;
  ++assigned_;
}

Status SocketListenComm::accept(std::unique_ptr<RecvComm>* out) {
  LOOM_TRY(acceptWaiting(listener_, "socket provider", [&](Socket s) {
    tuneStream(s.fd(), shared_->config);
    if (pending_.size() >= kMaxPendingStrangers) pending_.pop_front();
    pending_.push_back(Pending{std::move(s), Hello{}, 0});
  }));
  for (auto it = pending_.begin(); it != pending_.end();) {
    bool keep = true;
    readHello(*it, &keep);
    it = keep ? it + 1 : pending_.erase(it);
  }
  if (assigned_ < nstreams_ + 1) return Status::Ok();
  *out = std::make_unique<SocketRecvComm>(shared_, std::move(control_), std::move(streams_), peerInstance_);
  return Status::Ok();
}

// ---- sender --------------------------------------------------------------------------------------

SocketConnector::SocketConnector(std::shared_ptr<SocketShared> shared, const SocketHandle& handle)
    : shared_(std::move(shared)), handle_(handle), streams_(handle.nstreams + 1) {
  for (size_t i = 0; i < streams_.size(); ++i) {
    streams_[i].hello.secret = handle.secret;
    streams_[i].hello.instance = shared_->instance;
    streams_[i].hello.nstreams = handle.nstreams;
    streams_[i].hello.index = i == 0 ? kControlIndex : static_cast<uint32_t>(i - 1);
  }
}

Status SocketConnector::stepStream(Stream& s, bool* done) {
  *done = false;
  bool connected = false;
  LOOM_TRY(s.connect.step(handle_.address, [&](int fd) { tuneStream(fd, shared_->config); }, &connected));
  if (!connected) return Status::Ok();
  const int fd = s.connect.socket().fd();
  while (s.sent < sizeof s.hello) {
    const ssize_t w = ::send(fd, reinterpret_cast<const char*>(&s.hello) + s.sent, sizeof s.hello - s.sent,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      s.sent += static_cast<size_t>(w);
    } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      return Status::Ok();
    } else {
      return errorStatus(loomRemoteError, "introducing a stream to {}: {}", handle_.address.toString(), std::strerror(errno));
    }
  }
  *done = true;
  return Status::Ok();
}

Status SocketConnector::step(bool* done) {
  *done = true;
  for (Stream& s : streams_) {
    bool streamDone = false;
    LOOM_TRY(stepStream(s, &streamDone));
    *done = *done && streamDone;
  }
  return Status::Ok();
}

std::unique_ptr<SendComm> SocketConnector::finish() {
  std::vector<Socket> data;
  for (size_t i = 1; i < streams_.size(); ++i) data.push_back(std::move(streams_[i].connect.socket()));
  return std::make_unique<SocketSendComm>(shared_, std::move(streams_[0].connect.socket()), std::move(data),
                                          handle_.instance);
}

}  // namespace loom::net::socket
