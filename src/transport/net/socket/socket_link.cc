#include "transport/net/socket/socket_link.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace loom::net::socket {

namespace {

constexpr size_t kHeaderBytes = sizeof(uint64_t);
// The header no message has: the control stream goes on over the other direction's connection.
constexpr uint64_t kSwitchMark = ~0ull;

// An end of stream, a reset and a broken pipe all say the same: the peer's end went away (its process
// exited or aborted, or its host is gone); which one a rank sees depends on timing, so they read alike.
Status controlError(ssize_t n) {
  if (n == 0 || errno == ECONNRESET || errno == EPIPE)
    return errorStatus(loomRemoteError, "the connection was closed by the peer (did it exit or abort?){}",
                       n == 0 ? "" : fmt::format(" ({})", std::strerror(errno)));
  return errorStatus(loomRemoteError, "the control stream failed: {}", std::strerror(errno));
}

bool wouldBlock() { return errno == EAGAIN || errno == EWOULDBLOCK; }

}  // namespace

namespace {
constexpr size_t kControlReadAhead = 64 << 10;
}

SocketLink::SocketLink(std::shared_ptr<SocketShared> shared, Socket control, std::vector<Socket> streams, bool sending,
                       uint64_t peerInstance)
    : shared_(std::move(shared)),
      control_(std::make_shared<Socket>(std::move(control))),
      peerInstance_(peerInstance),
      sending_(sending) {
  if (!sending) controlIn_.resize(kControlReadAhead);
  const int nthreads = shared_->config.nthreads;
  for (size_t i = 0; i < streams.size(); ++i) {
    streams_.push_back(std::make_shared<DataStream>(std::move(streams[i]), sending));
    if (nthreads > 0) {
      HelperThread* helper = shared_->helpers[(i / shared_->config.nsocksPerThread) % nthreads].get();
      helperOf_.push_back(helper);
      helper->attach(streams_.back());
    }
  }
}

SocketLink::~SocketLink() {
  for (size_t i = 0; i < streams_.size(); ++i) {
    if (!helperOf_.empty()) helperOf_[i]->detach(streams_[i].get());
    ::shutdown(streams_[i]->fd(), SHUT_RDWR);  // the peer sees the end now, not when a helper lets go
  }
  // This direction ends; the socket itself closes when the other direction's link lets go too.
  if (control_->valid()) ::shutdown(control_->fd(), sending_ ? SHUT_WR : SHUT_RD);
  if (nextControl_ && nextControl_->valid() && !sending_) ::shutdown(nextControl_->fd(), SHUT_RD);
}

void SocketLink::moveControlTo(std::shared_ptr<Socket> other) {
  nextControl_ = std::move(other);
  switching_ = true;
  (void)progress();
}

void SocketLink::expectControlMove(std::shared_ptr<Socket> other) {
  nextControl_ = std::move(other);
  switching_ = true;
}

Status SocketLink::streamFailure() const {
  for (const auto& s : streams_)
    if (s->failed()) return Status(loomRemoteError, s->failure());
  return Status::Ok();
}

void SocketLink::queuePieces(Message& m) {
  const size_t n = streams_.size();
  const size_t pieceBytes = std::max(kMinPieceBytes, (m.header + n - 1) / n);
  const int pieces = static_cast<int>((m.header + pieceBytes - 1) / pieceBytes);
  m.piecesLeft.store(pieces, std::memory_order_relaxed);
  for (size_t offset = 0; offset < m.header; offset += pieceBytes) {
    const size_t s = nextStream_++ % n;
    streams_[s]->push(m.data + offset, std::min<size_t>(pieceBytes, m.header - offset), &m.piecesLeft);
    if (!helperOf_.empty()) helperOf_[s]->kick();
  }
}

Status SocketLink::post(char* data, size_t bytes, Request** request) {
  *request = nullptr;
  LOOM_TRY(broken_);
  auto free = std::find_if(messages_.begin(), messages_.end(), [](const Message& m) { return !m.inUse; });
  if (free == messages_.end()) return Status::Ok();  // all requests in use: the caller retries
  Message& m = *free;
  m.inUse = true;
  m.data = data;
  m.capacity = bytes;
  m.header = sending_ ? bytes : 0;
  m.controlMoved = 0;
  m.controlDone = false;
  m.piecesLeft.store(0, std::memory_order_relaxed);
  // A send's pieces can go at once: the receiver reads a stream only after the size arrived.
  if (sending_ && bytes > shared_->config.inlineBytes) queuePieces(m);
  controlQueue_.push_back(&m);
  *request = reinterpret_cast<Request*>(&m);
  // A send leaves at once; a receive is looked for when it is tested (no system call in vain here).
  return sending_ ? progress() : Status::Ok();
}

Status SocketLink::moveControlSend(Message& m, bool* finished) {
  const bool inlined = m.header <= shared_->config.inlineBytes;
  const size_t total = kHeaderBytes + (inlined ? m.header : 0);
  while (m.controlMoved < total) {
    iovec iov[2];
    int n = 0;
    if (m.controlMoved < kHeaderBytes)
      iov[n++] = {reinterpret_cast<char*>(&m.header) + m.controlMoved, kHeaderBytes - m.controlMoved};
    if (inlined) {
      const size_t done = m.controlMoved > kHeaderBytes ? m.controlMoved - kHeaderBytes : 0;
      if (m.header > done) iov[n++] = {m.data + done, m.header - done};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(n);
    const ssize_t w = ::sendmsg(control_->fd(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      m.controlMoved += static_cast<size_t>(w);
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else if (w < 0 && wouldBlock()) {
      *finished = false;
      return Status::Ok();
    } else {
      return controlError(-1);
    }
  }
  *finished = true;
  return Status::Ok();
}

Status SocketLink::fillControl(bool* got, bool* closed) {
  *got = *closed = false;
  if (controlInBegin_ == controlInEnd_) controlInBegin_ = controlInEnd_ = 0;
  if (controlInEnd_ == controlIn_.size()) return Status::Ok();  // full: the messages must take some first
  for (;;) {
    const ssize_t r = ::recv(control_->fd(), controlIn_.data() + controlInEnd_, controlIn_.size() - controlInEnd_, MSG_DONTWAIT);
    if (r > 0) {
      controlInEnd_ += static_cast<size_t>(r);
      *got = true;
      // Nothing ever travels back on this connection to carry the acknowledgement: let the kernel
      // delay it (and fold several into one) rather than send one per message (the kernel turns
      // quick acknowledgements back on now and then, so this is said after every read).
      int quick = 0;
      setsockopt(control_->fd(), IPPROTO_TCP, TCP_QUICKACK, &quick, sizeof quick);
      return Status::Ok();
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && wouldBlock()) return Status::Ok();
    if (r == 0) {
      *closed = true;
      return Status::Ok();
    }
    return controlError(r);
  }
}

Status SocketLink::moveControlRecv(Message& m, bool* finished) {
  *finished = false;
  for (;;) {
    const bool headerDone = m.controlMoved >= kHeaderBytes;
    // Bytes this message still takes from the control stream: its header, then an inline payload.
    const size_t need = !headerDone ? kHeaderBytes - m.controlMoved : kHeaderBytes + m.header - m.controlMoved;
    if (need == 0) break;
    const size_t buffered = controlInEnd_ - controlInBegin_;
    if (buffered == 0) {
      // A large inline payload goes straight to its buffer rather than through ours.
      if (headerDone && need >= controlIn_.size()) {
        const ssize_t r = ::recv(control_->fd(), m.data + (m.controlMoved - kHeaderBytes), need, MSG_DONTWAIT);
        if (r > 0) {
          m.controlMoved += static_cast<size_t>(r);
          continue;
        }
        if (r < 0 && (errno == EINTR || wouldBlock())) return Status::Ok();
        return controlError(r);
      }
      bool got = false, closed = false;
      LOOM_TRY(fillControl(&got, &closed));
      if (closed && m.controlMoved == 0) {
        // The sender is done with this connection: what it sent before still completes; only
        // receives that wait for another message fail (test()).
        peerClosed_ = true;
        return Status::Ok();
      }
      if (closed) return controlError(0);
      if (!got) return Status::Ok();
      continue;
    }
    const size_t take = std::min(buffered, need);
    char* to = headerDone ? m.data + (m.controlMoved - kHeaderBytes) : reinterpret_cast<char*>(&m.header) + m.controlMoved;
    std::memcpy(to, controlIn_.data() + controlInBegin_, take);
    controlInBegin_ += take;
    m.controlMoved += take;
    if (m.controlMoved != kHeaderBytes) continue;
    if (m.header == kSwitchMark && switching_) {
      // Nothing follows the mark on the old connection: go on with the shared one.
      control_ = std::move(nextControl_);
      switching_ = false;
      controlInBegin_ = controlInEnd_ = 0;
      m.controlMoved = 0;
      m.header = 0;
      continue;
    }
    if (m.header > m.capacity)
      return errorStatus(loomRemoteError, "a message of {} bytes arrived for a receive of {} bytes", m.header,
                         m.capacity);
    if (m.header > shared_->config.inlineBytes) {
      queuePieces(m);  // the payload comes on the data streams
      break;
    }
  }
  *finished = true;
  return Status::Ok();
}

Status SocketLink::progress() {
  LOOM_TRY(broken_);
  if (sending_ && switching_) {
    while (switchMarkSent_ < kHeaderBytes) {
      const ssize_t w = ::send(control_->fd(), reinterpret_cast<const char*>(&kSwitchMark) + switchMarkSent_,
                               kHeaderBytes - switchMarkSent_, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w > 0) {
        switchMarkSent_ += static_cast<size_t>(w);
      } else if (w < 0 && (errno == EINTR || wouldBlock())) {
        return Status::Ok();
      } else {
        return broken_ = controlError(-1);
      }
    }
    ::shutdown(control_->fd(), SHUT_WR);
    control_ = std::move(nextControl_);
    switching_ = false;
  }
  while (!controlQueue_.empty() && !peerClosed_) {
    Message& m = *controlQueue_.front();
    bool finished = false;
    Status st = sending_ ? moveControlSend(m, &finished) : moveControlRecv(m, &finished);
    if (!st.ok()) return broken_ = st;
    if (!finished) break;
    m.controlDone = true;
    controlQueue_.pop_front();
  }
  if (helperOf_.empty())
    for (const auto& s : streams_)
      while (s->progress(nullptr) == DataStream::Progress::Moved) {
      }
  return Status::Ok();
}

Status SocketLink::test(Request* request, bool* done, size_t* sizes) {
  *done = false;
  Message& m = *reinterpret_cast<Message*>(request);
  Status st = progress();
  if (st.ok()) st = streamFailure();
  if (!st.ok()) return broken_ = st;
  if (!m.controlDone && peerClosed_) return controlError(0);
  if (!m.controlDone || m.piecesLeft.load(std::memory_order_acquire) != 0) return Status::Ok();
  if (sizes) *sizes = m.header;
  m.inUse = false;
  *done = true;
  return Status::Ok();
}

void SocketLink::addWaits(WaitList* waits) {
  if (!broken_.ok()) {
    waits->capSleep(0);  // the next test reports it
    return;
  }
  if (!controlQueue_.empty() && !peerClosed_) waits->add(control_->fd(), sending_ ? POLLOUT : POLLIN);
  // A message past the inline size is under way (a receive: a buffer that large is posted), from its
  // header to its last piece.
  const size_t inlineBytes = shared_->config.inlineBytes;
  if (std::any_of(messages_.begin(), messages_.end(), [&](const Message& m) {
        return m.inUse && (sending_ ? m.header : m.capacity) > inlineBytes;
      }))
    waits->bulk = true;
  const bool piecesPending = std::any_of(messages_.begin(), messages_.end(), [](const Message& m) {
    return m.inUse && m.piecesLeft.load(std::memory_order_relaxed) != 0;
  });
  if (!piecesPending) return;
  if (!helperOf_.empty()) {
    shared_->signal.addWaits(waits);
    return;
  }
  for (const auto& s : streams_)
    if (s->hasWork()) waits->add(s->fd(), s->pollEvents());
}

}  // namespace loom::net::socket
