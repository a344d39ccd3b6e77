// One direction of a link between two ranks. Both sides are non-blocking: the executor asks, and
// moves on to another lane when the answer is "not yet". Messages are matched in order; their size
// is known to both sides from their plans, and a disagreement is reported, never silently absorbed.
#pragma once

#include <cstddef>
#include <string>

#include "base/status.h"

namespace loom {

class SendConnection {
 public:
  virtual ~SendConnection() = default;
  // A buffer of at least slotBytes() for the next message, or nullptr while the peer's FIFO is full.
  virtual void* trySendBuffer() = 0;
  // Hands the message written into the last trySendBuffer() result to the peer.
  virtual Status commitSend(size_t bytes) = 0;
  // Pushes out data still queued on this side (socket); true when nothing remains queued.
  virtual Status flush(bool* drained) {
    *drained = true;
    return Status::Ok();
  }
  // A descriptor to poll for writability while data is queued, or -1.
  virtual int pollFd() const { return -1; }
  virtual size_t slotBytes() const = 0;
  // Best effort: tells the peer this rank failed and why, so its error can name the root cause.
  // Only the thread that drives this connection may call it.
  virtual void notifyFailure(const std::string& reason) { (void)reason; }
};

class RecvConnection {
 public:
  virtual ~RecvConnection() = default;
  // The next message when it has fully arrived (*data set), else *data == nullptr. A message of
  // another size than expectedBytes is an error: the ranks disagree about the operation.
  virtual Status tryRecv(size_t expectedBytes, const void** data) = 0;
  // Gives the message's space back to the sender.
  virtual void releaseRecv() = 0;
  virtual int pollFd() const { return -1; }
};

}  // namespace loom
