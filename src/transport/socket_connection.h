// Send/receive over one TCP stream per (peer, channel, direction). Messages are framed with their
// length. The sender stages up to nslots messages and writes them without blocking whenever the
// kernel takes more; the receiver assembles one message at a time and hands out a pointer to it.
#pragma once

#include <deque>
#include <vector>

#include "base/socket.h"
#include "transport/connection.h"

namespace loom {

class SocketSendConnection final : public SendConnection {
 public:
  SocketSendConnection(Socket socket, size_t nslots, size_t slotBytes, int peer);
  void* trySendBuffer() override;
  Status commitSend(size_t bytes) override;
  Status flush(bool* drained) override;
  int pollFd() const override { return queue_.empty() ? -1 : socket_.fd(); }
  size_t slotBytes() const override { return slotBytes_; }
  void notifyFailure(const std::string& reason) override;

 private:
  struct Pending {
    size_t slot;
    uint64_t header;  // message length, sent first
    size_t sent;      // bytes of header + payload already written
  };
  Socket socket_;
  size_t nslots_, slotBytes_;
  int peer_;
  std::vector<char> staging_;
  std::deque<Pending> queue_;
  uint64_t posted_ = 0;
};

// A frame header no real message has: the sender failed; kFailureReasonBytes of text follow.
constexpr uint64_t kFailureFrame = ~0ull;
constexpr size_t kFailureReasonBytes = 256;

class SocketRecvConnection final : public RecvConnection {
 public:
  SocketRecvConnection(Socket socket, size_t slotBytes, int peer);
  Status tryRecv(size_t expectedBytes, const void** data) override;
  void releaseRecv() override;
  int pollFd() const override { return socket_.fd(); }

 private:
  Status readSome(char* dst, size_t want, size_t* got);
  Socket socket_;
  size_t slotBytes_;
  int peer_;
  std::vector<char> buffer_;
  char reason_[kFailureReasonBytes] = {0};
  uint64_t header_ = 0;
  size_t headerGot_ = 0;
  size_t payloadGot_ = 0;
};

}  // namespace loom
