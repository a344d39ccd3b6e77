#include "transport/net/socket/data_stream.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "transport/net/socket/helper_threads.h"

namespace loom::net::socket {

void DataStream::push(char* data, size_t bytes, std::atomic<int>* piecesLeft) {
  const uint32_t t = tail_.load(std::memory_order_relaxed);
  Piece& p = ring_[t % ring_.size()];
  p.data = data;
  p.bytes = bytes;
  p.moved = 0;
  p.piecesLeft = piecesLeft;
  // seq_cst: pairs with a sleeping helper's re-check (helper_threads.cc).
  tail_.store(t + 1, std::memory_order_seq_cst);
}

std::string DataStream::failure() const {
  std::lock_guard<std::mutex> lock(failureMutex_);
  return failure_;
}

void DataStream::fail(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(failureMutex_);
    if (failure_.empty()) failure_ = why;
  }
  failed_.store(true, std::memory_order_release);
}

DataStream::Progress DataStream::progress(CompletionSignal* signal) {
  if (failed_.load(std::memory_order_relaxed)) return Progress::Failed;
  const uint32_t h = head_.load(std::memory_order_relaxed);
  if (h == tail_.load(std::memory_order_acquire)) return Progress::Idle;
  Piece& p = ring_[h % ring_.size()];
  bool moved = false;
  while (p.moved < p.bytes) {
    const size_t want = p.bytes - p.moved;
    const ssize_t n = sending_ ? ::send(socket_.fd(), p.data + p.moved, want, MSG_NOSIGNAL | MSG_DONTWAIT)
                               : ::recv(socket_.fd(), p.data + p.moved, want, MSG_DONTWAIT);
    if (n > 0) {
      p.moved += static_cast<size_t>(n);
      moved = true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return moved ? Progress::Moved : Progress::Blocked;
    fail(n == 0 ? "a data stream was closed by the peer (did it exit or abort?)"
                : fmt::format("a data stream failed: {}", std::strerror(errno)));
    if (signal) signal->notify();  // the driving thread may sleep; it must see the failure
    return Progress::Failed;
  }
  head_.store(h + 1, std::memory_order_release);
  if (p.piecesLeft->fetch_sub(1, std::memory_order_acq_rel) == 1 && signal) signal->notify();
  return Progress::Moved;
}

}  // namespace loom::net::socket
