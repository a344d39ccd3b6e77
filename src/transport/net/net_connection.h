// The net transport: Loom's connections (transport/connection.h) over any network provider's comms.
//
// Sending: a message leaves straight from the plan's buffers when the provider can read them as they
// are (it needs no registration, or caches registrations: regIsGlobal), else from one of `nslots`
// registered staging slots. Either way it is posted with isend, in order, and retried while the
// provider cannot take it.
// Receiving: `nslots` registered buffers are always posted with irecv, in order; the executor reads a
// message in place and gives its buffer back, which posts it again.
// A failing rank sends each peer a notice in band: one message longer than any slot, whose tail holds
// the reason, so the peer's error names the root cause.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "transport/connection.h"
#include "transport/net/provider.h"

namespace loom::net {

// A failure notice is slotBytes + kNoticeBytes long: longer than any message, so it cannot be mistaken
// for one. Past the slot: the rank the sender waited on when it gave up (int32, -1 when it failed for a
// reason of its own), 4 spare bytes, then the reason text.
inline constexpr size_t kNoticeBytes = 1024;  // room for a chain of a few ranks' reasons
inline constexpr size_t kNoticeTextOffset = 8;
// The "waited on" field of a notice that says the sender closed its communicator normally (its reason
// says so too, so that it reads like any other failure to a rank still waiting on it).
inline constexpr int kClosingNotice = -2;

// Bytes that left one rank by each path (for LOOM_DEBUG=INFO and the tests): `direct` from the plan's
// buffers, `slots` through staging slots (a copy, or a reduction's result computed there).
struct SendCounters {
  uint64_t direct = 0;
  uint64_t slots = 0;
};

// How a connection may send from the caller's memory.
enum class DirectMode { None, Unregistered, RegisterEachSend };
DirectMode directModeFor(const DeviceProperties& props);

class NetSendConnection final : public SendConnection {
 public:
  // `counters` (shared by a rank's connections) outlives the connection.
  static Status create(std::unique_ptr<SendComm> comm, size_t nslots, size_t slotBytes, int peer, DirectMode direct,
                       SendCounters* counters, std::unique_ptr<NetSendConnection>* out);
  ~NetSendConnection() override;

  void* trySendBuffer() override;
  Status commitSend(size_t bytes) override;
  bool sendsDirect() const override { return direct_ != DirectMode::None; }
  bool directSendReady() override;
  Status sendDirect(const void* data, size_t bytes, uint64_t* ticket) override;
  bool sendDone(uint64_t ticket) override;
  Status flush(bool* drained) override;
  void addWaits(WaitList* waits) override;
  size_t slotBytes() const override { return slotBytes_; }
  void notifyFailure(const std::string& reason) override;

  // notifyFailure in three steps, so that a rank tells all its peers at once: queue the notice, push
  // until noticeDone() (all queued messages left, or the connection broke), then let go of the comm,
  // which stops the provider from reading the caller's buffers and tells the peer this side is gone.
  // `waitsOn`: the rank this one gave up waiting for (a timeout), -1 for a failure of its own.
  void postNotice(const std::string& reason, int waitsOn = -1);
  bool noticeDone();
  void letGo();
  SendComm* comm() const { return comm_.get(); }

 private:
  struct Outgoing {
    const void* data = nullptr;
    size_t bytes = 0;
    MemoryRegion* region = nullptr;
    bool ownRegion = false;  // registered for this send only
    bool staged = false;
    Request* request = nullptr;  // null until the provider took it
  };
  NetSendConnection(std::unique_ptr<SendComm> comm, size_t nslots, size_t slotBytes, int peer, DirectMode direct,
                    SendCounters* counters);
  Status progress();
  Status enqueue(Outgoing out);
  Status closed() const;

  std::unique_ptr<SendComm> comm_;  // null once this rank failed and let go of the connection
  size_t nslots_, slotBytes_;
  int peer_;
  DirectMode direct_;
  SendCounters* counters_;
  std::vector<char> staging_;
  MemoryRegion* stagingRegion_ = nullptr;
  std::vector<char> notice_;
  MemoryRegion* noticeRegion_ = nullptr;
  std::deque<Outgoing> queue_;  // posting order; the head completes first
  size_t posted_ = 0;           // queue_ entries the provider took
  uint64_t stagedQueued_ = 0, stagedDone_ = 0;
  uint64_t ticketsQueued_ = 0, ticketsDone_ = 0;
  Status broken_;
};

// How long a failing rank keeps pushing its notices (and what was queued before them) to its peers.
inline constexpr int64_t kNoticeDrainMs = 200;

// Pushes the notices posted on `connections` until every one left or `timeoutMs` passed.
void drainNotices(const std::vector<NetSendConnection*>& connections, int64_t timeoutMs);

class NetRecvConnection final : public RecvConnection {
 public:
  static Status create(std::unique_ptr<RecvComm> comm, size_t nslots, size_t slotBytes, int peer,
                       std::unique_ptr<NetRecvConnection>* out);
  ~NetRecvConnection() override;

  Status tryRecv(size_t expectedBytes, const void** data) override;
  void releaseRecv() override;
  void addWaits(WaitList* waits) override;
  Status peerFailure() override;
  // The peer's failure notice, when one has arrived behind the messages before it: false otherwise.
  bool notice(int* waitsOn, std::string* reason);
  RecvComm* comm() const { return comm_.get(); }

 private:
  struct Slot {
    Request* request = nullptr;
    bool posted = false;
    bool done = false;
    size_t bytes = 0;
  };
  NetRecvConnection(std::unique_ptr<RecvComm> comm, size_t nslots, size_t slotBytes, int peer);
  char* slotData(size_t i) { return buffer_.data() + i * (slotBytes_ + kNoticeBytes); }
  Status postFree();
  // Tests slot i (posted, in order); *done when its message is complete.
  Status testSlot(size_t i, bool* done);
  // The error a notice in slot i stands for: loomTimeout when the peer gave up waiting on another
  // rank (the executor then looks for the rank everyone waits on), loomRemoteError otherwise.
  Status noticeIn(size_t i) const;
  void readNotice(size_t i, int* waitsOn, std::string* reason) const;
  // The slot of a notice that arrived behind the messages before it, SIZE_MAX when none has.
  Status findNotice(size_t* slot);

  std::unique_ptr<RecvComm> comm_;
  size_t nslots_, slotBytes_;
  int peer_;
  std::vector<char> buffer_;
  MemoryRegion* region_ = nullptr;
  std::vector<Slot> slots_;
  uint64_t head_ = 0;    // next message to hand out
  uint64_t posted_ = 0;  // receives posted so far (slot = index % nslots)
  Status broken_;
};

}  // namespace loom::net
