// One TCP data stream of a socket comm and the pieces of messages queued on it. The comm's driving
// thread queues pieces (a single producer); a helper thread, or the driving thread itself when there
// are none, moves them (a single consumer) with non-blocking system calls. A comm has at most one piece
// of each message on a stream, so a ring of kMaxRequestsPerComm pieces never overflows.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <mutex>
#include <string>

#include "base/socket.h"
#include "base/status.h"
#include "transport/net/provider.h"

namespace loom::net::socket {

class CompletionSignal;

struct Piece {
  char* data = nullptr;
  size_t bytes = 0;
  size_t moved = 0;
  std::atomic<int>* piecesLeft = nullptr;  // the message's count of unfinished pieces
};

class DataStream {
 public:
  enum class Progress { Idle, Moved, Blocked, Failed };

  DataStream(Socket socket, bool sending) : socket_(std::move(socket)), sending_(sending) {}

  // Producer side.
  void push(char* data, size_t bytes, std::atomic<int>* piecesLeft);
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  std::string failure() const;

  // Consumer side: moves the head piece as far as the socket allows. `signal` (may be null) is told
  // when a message's last piece finished.
  Progress progress(CompletionSignal* signal);
  bool hasWork() const { return head_.load(std::memory_order_relaxed) != tail_.load(std::memory_order_seq_cst); }
  int fd() const { return socket_.fd(); }
  short pollEvents() const { return sending_ ? POLLOUT : POLLIN; }

  // Helper threads take `busy` around progress(); detaching a stream takes it once after setting
  // `closed`, so that no helper touches the stream (or the memory its pieces point to) afterwards.
  std::mutex busy;
  std::atomic<bool> closed{false};

 private:
  void fail(const std::string& why);

  Socket socket_;
  bool sending_;
  std::array<Piece, 2 * kMaxRequestsPerComm> ring_;  // twice what can be queued: room to spare
  std::atomic<uint32_t> head_{0}, tail_{0};
  std::atomic<bool> failed_{false};
  mutable std::mutex failureMutex_;
  std::string failure_;
};

}  // namespace loom::net::socket
