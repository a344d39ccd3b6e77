// One direction of a socket connection, NCCL's design: a control stream plus N data streams. Every
// message starts with its size on the control stream; messages up to `inlineBytes` follow it there,
// larger ones are cut into pieces of at least kMinPieceBytes spread over the data streams (each
// message continues on the stream after the one the previous message ended on; both sides compute the
// same split from the size). The control stream is moved by the comm's driving thread (a small message
// costs no thread hop, and the receiver reads its stream ahead, so that a header and its message take
// one system call); data streams by helper threads, or by the driving thread when there are none.
#pragma once

#include <array>
#include <atomic>
#include <deque>
#include <memory>
#include <vector>

#include "base/socket.h"
#include "transport/net/provider.h"
#include "transport/net/socket/data_stream.h"
#include "transport/net/socket/helper_threads.h"

namespace loom::net::socket {

inline constexpr size_t kMinPieceBytes = 64 << 10;

struct SocketConfig {
  int nthreads = 0;         // helper threads per provider (0: the driving thread moves data streams)
  int nsocksPerThread = 1;  // data streams per helper thread and comm
  size_t inlineBytes = 0;   // messages up to this size travel on the control stream
  int bufferBytes = 0;      // SO_SNDBUF/SO_RCVBUF for every stream (0: the kernel's autotuning)
  int streams() const { return (nthreads > 0 ? nthreads : 1) * nsocksPerThread; }
};

// What the comms of one provider instance share.
struct SocketShared {
  SocketConfig config;
  uint64_t instance = 0;  // random: tells the provider instances of a job apart
  CompletionSignal signal;
  std::vector<std::unique_ptr<HelperThread>> helpers;  // config.nthreads of them
};

class SocketLink {
 public:
  SocketLink(std::shared_ptr<SocketShared> shared, Socket control, std::vector<Socket> streams, bool sending,
             uint64_t peerInstance);
  ~SocketLink();
  SocketLink(const SocketLink&) = delete;
  SocketLink& operator=(const SocketLink&) = delete;

  // `data` is read (send) or written (receive) until the request is done.
  Status post(char* data, size_t bytes, Request** request);
  Status test(Request* request, bool* done, size_t* sizes);
  void addWaits(WaitList* waits);

  // One control connection for both directions between two provider instances (shared_control.h):
  // a sending link moves its control stream onto `other` after a switch mark on its own; a receiving
  // link reads on until that mark, then goes on with `other`.
  uint64_t peerInstance() const { return peerInstance_; }
  bool idle() const { return controlQueue_.empty() || !sending_; }
  const std::shared_ptr<Socket>& control() const { return control_; }
  void moveControlTo(std::shared_ptr<Socket> other);
  void expectControlMove(std::shared_ptr<Socket> other);

 private:
  struct Message {
    bool inUse = false;
    char* data = nullptr;
    size_t capacity = 0;   // receive: the buffer's size
    uint64_t header = 0;   // the message's size, as it travels on the control stream
    size_t controlMoved = 0;
    bool controlDone = false;
    std::atomic<int> piecesLeft{0};
  };
  Status progress();
  Status moveControlSend(Message& m, bool* finished);
  Status moveControlRecv(Message& m, bool* finished);
  // Receive side: reads what the control stream holds (up to the buffer's size) in one call; false
  // when nothing came (*closed: the sender ended the stream).
  Status fillControl(bool* got, bool* closed);
  // Cuts a message into pieces on the data streams and hands them to whoever moves them.
  void queuePieces(Message& m);
  Status streamFailure() const;

  std::shared_ptr<SocketShared> shared_;
  std::shared_ptr<Socket> control_;  // shared with the other direction's link once they share it
  uint64_t peerInstance_;
  std::shared_ptr<Socket> nextControl_;  // where the control stream goes on after the switch mark
  size_t switchMarkSent_ = 0;            // sending: bytes of the mark written (it goes before anything else)
  bool switching_ = false;
  std::vector<std::shared_ptr<DataStream>> streams_;
  std::vector<HelperThread*> helperOf_;  // per stream; empty without helper threads
  bool sending_;
  std::array<Message, kMaxRequestsPerComm> messages_;
  std::deque<Message*> controlQueue_;  // posted, not through the control stream yet, in order
  uint32_t nextStream_ = 0;
  bool peerClosed_ = false;  // receive: the sender closed the control stream between two messages
  // Receive side: bytes read from the control stream ahead of the messages that take them (headers
  // and small messages arrive together: one system call for several).
  std::vector<char> controlIn_;
  size_t controlInBegin_ = 0, controlInEnd_ = 0;
  Status broken_;
};

}  // namespace loom::net::socket
