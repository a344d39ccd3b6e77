#include "transport/socket_connection.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>

namespace loom {

SocketSendConnection::SocketSendConnection(Socket socket, size_t nslots, size_t slotBytes, int peer)
    : socket_(std::move(socket)), nslots_(nslots), slotBytes_(slotBytes), peer_(peer), staging_(nslots * slotBytes) {}

void* SocketSendConnection::trySendBuffer() {
  if (queue_.size() >= nslots_) {
    bool drained = false;
    if (!flush(&drained).ok() || queue_.size() >= nslots_) return nullptr;
  }
  return staging_.data() + (posted_ % nslots_) * slotBytes_;
}

Status SocketSendConnection::commitSend(size_t bytes) {
  if (bytes > slotBytes_) return internalError("message of {} bytes exceeds the {}-byte slot", bytes, slotBytes_);
  queue_.push_back(Pending{posted_ % nslots_, bytes, 0});
  ++posted_;
  bool drained = false;
  return flush(&drained);
}

Status SocketSendConnection::flush(bool* drained) {
  while (!queue_.empty()) {
    Pending& p = queue_.front();
    size_t total = sizeof(p.header) + p.header;
    iovec iov[2];
    int n = 0;
    if (p.sent < sizeof(p.header)) {
      iov[n++] = {reinterpret_cast<char*>(&p.header) + p.sent, sizeof(p.header) - p.sent};
      iov[n++] = {staging_.data() + p.slot * slotBytes_, p.header};
    } else {
      iov[n++] = {staging_.data() + p.slot * slotBytes_ + (p.sent - sizeof(p.header)), total - p.sent};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(n);
    ssize_t w = ::sendmsg(socket_.fd(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
      return errorStatus(loomRemoteError, "send to rank {}: {}", peer_, std::strerror(errno));
    }
    p.sent += static_cast<size_t>(w);
    if (p.sent == total) queue_.pop_front();
  }
  *drained = queue_.empty();
  return Status::Ok();
}

void SocketSendConnection::notifyFailure(const std::string& reason) {
  bool drained = false;
  if (!queue_.empty() && queue_.front().sent > 0) (void)flush(&drained);
  if (!queue_.empty() && queue_.front().sent > 0) {
    ::shutdown(socket_.fd(), SHUT_WR);  // mid-frame: the peer sees the stream end instead
    return;
  }
  queue_.clear();
  char frame[sizeof(uint64_t) + kFailureReasonBytes] = {0};
  std::memcpy(frame, &kFailureFrame, sizeof(uint64_t));
  std::snprintf(frame + sizeof(uint64_t), kFailureReasonBytes, "%s", reason.c_str());
  (void)::send(socket_.fd(), frame, sizeof(frame), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(socket_.fd(), SHUT_WR);
}

SocketRecvConnection::SocketRecvConnection(Socket socket, size_t slotBytes, int peer)
    : socket_(std::move(socket)), slotBytes_(slotBytes), peer_(peer), buffer_(slotBytes) {}

Status SocketRecvConnection::readSome(char* dst, size_t want, size_t* got) {
  while (*got < want) {
    ssize_t r = ::recv(socket_.fd(), dst + *got, want - *got, MSG_DONTWAIT);
    if (r > 0) {
      *got += static_cast<size_t>(r);
      continue;
    }
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return Status::Ok();
    return errorStatus(loomRemoteError, "connection to rank {} {}", peer_,
                       r == 0 ? "closed by the peer (did it exit or abort?)" : std::strerror(errno));
  }
  return Status::Ok();
}

Status SocketRecvConnection::tryRecv(size_t expectedBytes, const void** data) {
  *data = nullptr;
  if (headerGot_ < sizeof(header_)) {
    LOOM_TRY(readSome(reinterpret_cast<char*>(&header_), sizeof(header_), &headerGot_));
    if (headerGot_ < sizeof(header_)) return Status::Ok();
    if (header_ != expectedBytes && header_ != kFailureFrame)
      return errorStatus(loomInvalidUsage,
                         "rank {} sent a message of {} bytes where {} were expected: the ranks called "
                         "different operations or counts",
                         peer_, header_, expectedBytes);
  }
  if (header_ == kFailureFrame) {
    LOOM_TRY(readSome(reason_, sizeof(reason_), &payloadGot_));
    if (payloadGot_ < sizeof(reason_)) return Status::Ok();
    reason_[sizeof(reason_) - 1] = '\0';
    return errorStatus(loomRemoteError, "rank {} failed: {}", peer_, reason_);
  }
  LOOM_TRY(readSome(buffer_.data(), header_, &payloadGot_));
  if (payloadGot_ == header_) *data = buffer_.data();
  return Status::Ok();
}

void SocketRecvConnection::releaseRecv() {
  headerGot_ = 0;
  payloadGot_ = 0;
}

}  // namespace loom
