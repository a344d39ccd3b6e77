// One direction of a link between two ranks. Both sides are non-blocking: the executor asks, and
// moves on to another lane when the answer is "not yet". Messages are matched in order; their size
// is known to both sides from their plans, and a disagreement is reported, never silently absorbed.
#pragma once

#include <poll.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace loom {

// What a thread that waits on some connections may sleep on: descriptors to poll, and the longest
// it may sleep before it must look again (a connection that nothing can wake asks for short naps).
// Memory connections add nothing: their peers ring the waiter's doorbell.
struct WaitList {
  std::vector<pollfd> fds;
  int64_t maxSleepUs = INT64_MAX;
  // A large message is moving through the kernel's sockets: its copies need a core as much as the
  // waiting thread does (core/run/executor.h stops spinning when cores are short).
  bool bulk = false;

  void add(int fd, short events) { fds.push_back(pollfd{fd, events, 0}); }
  void capSleep(int64_t us) { maxSleepUs = std::min(maxSleepUs, us); }
  void clear() {
    fds.clear();
    maxSleepUs = INT64_MAX;
    bulk = false;
  }
};

class SendConnection {
 public:
  virtual ~SendConnection() = default;
  // A buffer of at least slotBytes() for the next message, or nullptr while the peer's FIFO is full.
  virtual void* trySendBuffer() = 0;
  // Hands the message written into the last trySendBuffer() result to the peer.
  virtual Status commitSend(size_t bytes) = 0;

  // Direct sends (network connections whose provider reads the caller's memory): the message goes
  // straight from the caller's buffer, which must stay unchanged until sendDone(ticket). A caller
  // first asks directSendReady() (room for one more), prepares the data, then calls sendDirect.
  // Connections that always copy (sendsDirect() false) are only used through trySendBuffer.
  virtual bool sendsDirect() const { return false; }
  virtual bool directSendReady() { return false; }
  virtual Status sendDirect(const void* data, size_t bytes, uint64_t* ticket) {
    (void)data, (void)bytes, (void)ticket;
    return internalError("this connection has no direct sends");
  }
  virtual bool sendDone(uint64_t ticket) { return (void)ticket, true; }

  // Pushes out data still queued on this side; true when nothing remains queued.
  virtual Status flush(bool* drained) {
    *drained = true;
    return Status::Ok();
  }
  // What a thread waiting on this connection (for a free slot, a finished send or a flush) may sleep on.
  virtual void addWaits(WaitList* waits) { (void)waits; }
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
  // What a thread waiting for the next message may sleep on.
  virtual void addWaits(WaitList* waits) { (void)waits; }
  // loomRemoteError when the peer is known to have failed (a failure notice waits among the
  // messages that arrived, or the connection broke); cheap enough to ask while a wait is stalled.
  virtual Status peerFailure() { return Status::Ok(); }
};

}  // namespace loom
