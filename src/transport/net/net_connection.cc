#include "transport/net/net_connection.h"

#include <poll.h>

#include <algorithm>
#include <cstring>

#include "base/clock.h"
#include "base/log.h"

namespace loom::net {

namespace {

}  // namespace

DirectMode directModeFor(const DeviceProperties& props) {
  if (!(props.ptrSupport & kHostPointers)) return DirectMode::None;
  if (!props.hostNeedsRegistration) return DirectMode::Unregistered;
  return props.regIsGlobal ? DirectMode::RegisterEachSend : DirectMode::None;
}

// ---- sending ---------------------------------------------------------------------------------------

NetSendConnection::NetSendConnection(std::unique_ptr<SendComm> comm, size_t nslots, size_t slotBytes, int peer,
                                     DirectMode direct, SendCounters* counters)
    : comm_(std::move(comm)),
      nslots_(nslots),
      slotBytes_(slotBytes),
      peer_(peer),
      direct_(direct),
      counters_(counters),
      staging_(nslots * slotBytes) {}

Status NetSendConnection::create(std::unique_ptr<SendComm> comm, size_t nslots, size_t slotBytes, int peer,
                                 DirectMode direct, SendCounters* counters, std::unique_ptr<NetSendConnection>* out) {
  if (nslots + 1 > static_cast<size_t>(kMaxRequestsPerComm))
    return invalidArgument("{} slots exceed the {} requests a network comm may have outstanding", nslots,
                           kMaxRequestsPerComm);
  std::unique_ptr<NetSendConnection> c(
      new NetSendConnection(std::move(comm), nslots, slotBytes, peer, direct, counters));
  LOOM_TRY(c->comm_->registerMemory(c->staging_.data(), c->staging_.size(), kHostPointers, &c->stagingRegion_)
               .withContext(fmt::format("registering the send slots for rank {}", peer)));
  *out = std::move(c);
  return Status::Ok();
}

// The comm goes first: its provider may still read the slots (or write them, below) until then.
NetSendConnection::~NetSendConnection() { letGo(); }

Status NetSendConnection::closed() const {
  return errorStatus(loomRemoteError, "the connection to rank {} was closed after an earlier failure", peer_);
}

Status NetSendConnection::progress() {
  if (!broken_.ok()) return broken_;
  if (!comm_) return closed();
  while (posted_ < queue_.size()) {  // in order: never post a message before an earlier one
    Outgoing& o = queue_[posted_];
    Status st = comm_->isend(o.data, o.bytes, 0, o.region, &o.request);
    if (!st.ok()) return broken_ = st.withContext(fmt::format("send to rank {}", peer_));
    if (!o.request) break;
    ++posted_;
  }
  while (posted_ > 0) {
    Outgoing& o = queue_.front();
    bool done = false;
    Status st = comm_->test(o.request, &done, nullptr);
    if (!st.ok()) return broken_ = st.withContext(fmt::format("send to rank {}", peer_));
    if (!done) break;
    if (o.ownRegion) (void)comm_->deregisterMemory(o.region);
    if (o.staged) ++stagedDone_;
    ++ticketsDone_;
    queue_.pop_front();
    --posted_;
  }
  return Status::Ok();
}

Status NetSendConnection::enqueue(Outgoing out) {
  queue_.push_back(out);
  ++ticketsQueued_;
  return progress();
}

void* NetSendConnection::trySendBuffer() {
  // Errors surface in flush(); here they only mean "no buffer".
  if (!progress().ok()) return nullptr;
  if (stagedQueued_ - stagedDone_ >= nslots_ || queue_.size() >= static_cast<size_t>(kMaxRequestsPerComm) - 1)
    return nullptr;
  return staging_.data() + (stagedQueued_ % nslots_) * slotBytes_;
}

Status NetSendConnection::commitSend(size_t bytes) {
  if (bytes > slotBytes_) return internalError("message of {} bytes exceeds the {}-byte slot", bytes, slotBytes_);
  Outgoing o;
  o.data = staging_.data() + (stagedQueued_ % nslots_) * slotBytes_;
  o.bytes = bytes;
  o.region = stagingRegion_;
  o.staged = true;
  ++stagedQueued_;
  counters_->slots += bytes;
  return enqueue(o);
}

bool NetSendConnection::directSendReady() {
  // Slots and direct sends share the comm's requests; one stays free for a failure notice.
  return progress().ok() && queue_.size() < static_cast<size_t>(kMaxRequestsPerComm) - 1;
}

Status NetSendConnection::sendDirect(const void* data, size_t bytes, uint64_t* ticket) {
  if (bytes > slotBytes_) return internalError("message of {} bytes exceeds the {}-byte slot", bytes, slotBytes_);
  if (!comm_) return closed();
  Outgoing o;
  o.data = data;
  o.bytes = bytes;
  if (direct_ == DirectMode::RegisterEachSend) {
    // The provider caches registrations (regIsGlobal): registering per message is what it is made for.
    LOOM_TRY(comm_->registerMemory(const_cast<void*>(data), bytes, kHostPointers, &o.region)
                 .withContext(fmt::format("registering a buffer to send to rank {}", peer_)));
    o.ownRegion = true;
  }
  *ticket = ticketsQueued_;
  counters_->direct += bytes;
  return enqueue(o);
}

bool NetSendConnection::sendDone(uint64_t ticket) {
  if (ticket >= ticketsDone_) (void)progress();
  return ticket < ticketsDone_;
}

Status NetSendConnection::flush(bool* drained) {
  Status st = progress();
  *drained = queue_.empty();
  return st;
}

void NetSendConnection::addWaits(WaitList* waits) {
  if (comm_ && !queue_.empty()) comm_->addWaits(waits);
}

void NetSendConnection::postNotice(const std::string& reason, int waitsOn) {
  if (!comm_ || !broken_.ok() || queue_.size() >= static_cast<size_t>(kMaxRequestsPerComm)) return;
  notice_.assign(slotBytes_ + kNoticeBytes, 0);
  const int32_t on = waitsOn;
  std::memcpy(notice_.data() + slotBytes_, &on, sizeof on);
  std::snprintf(notice_.data() + slotBytes_ + kNoticeTextOffset, kNoticeBytes - kNoticeTextOffset, "%s", reason.c_str());
  if (!comm_->registerMemory(notice_.data(), notice_.size(), kHostPointers, &noticeRegion_).ok()) return;
  Outgoing o;
  o.data = notice_.data();
  o.bytes = notice_.size();
  o.region = noticeRegion_;
  (void)enqueue(o);
}

bool NetSendConnection::noticeDone() { return !comm_ || !progress().ok() || queue_.empty(); }

void NetSendConnection::letGo() {
  if (!comm_) return;
  for (Outgoing& o : queue_)
    if (o.ownRegion) (void)comm_->deregisterMemory(o.region);
  if (noticeRegion_) (void)comm_->deregisterMemory(noticeRegion_);
  if (stagingRegion_) (void)comm_->deregisterMemory(stagingRegion_);
  noticeRegion_ = stagingRegion_ = nullptr;
  queue_.clear();
  posted_ = 0;
  comm_.reset();
}

void NetSendConnection::notifyFailure(const std::string& reason) {
  postNotice(reason);
  drainNotices({this}, kNoticeDrainMs);
  letGo();
}

void drainNotices(const std::vector<NetSendConnection*>& connections, int64_t timeoutMs) {
  // Bounded: a peer may be gone, or wedged; what does not leave in time is dropped.
  const Deadline deadline = Deadline::afterMs(timeoutMs);
  WaitList waits;
  for (;;) {
    waits.clear();
    bool done = true;
    for (NetSendConnection* c : connections)
      if (!c->noticeDone()) {
        done = false;
        c->addWaits(&waits);
      }
    if (done || deadline.expired()) return;
    const int64_t us = std::min<int64_t>(waits.maxSleepUs, 1000);
    const timespec ts{0, static_cast<long>(us) * 1000};
    ::ppoll(waits.fds.data(), waits.fds.size(), &ts, nullptr);
  }
}

// ---- receiving -------------------------------------------------------------------------------------

NetRecvConnection::NetRecvConnection(std::unique_ptr<RecvComm> comm, size_t nslots, size_t slotBytes, int peer)
    : comm_(std::move(comm)),
      nslots_(nslots),
      slotBytes_(slotBytes),
      peer_(peer),
      buffer_(nslots * (slotBytes + kNoticeBytes)),
      slots_(nslots) {}

Status NetRecvConnection::create(std::unique_ptr<RecvComm> comm, size_t nslots, size_t slotBytes, int peer,
                                 std::unique_ptr<NetRecvConnection>* out) {
  if (nslots > static_cast<size_t>(kMaxRequestsPerComm))
    return invalidArgument("{} slots exceed the {} requests a network comm may have outstanding", nslots,
                           kMaxRequestsPerComm);
  std::unique_ptr<NetRecvConnection> c(new NetRecvConnection(std::move(comm), nslots, slotBytes, peer));
  LOOM_TRY(c->comm_->registerMemory(c->buffer_.data(), c->buffer_.size(), kHostPointers, &c->region_)
               .withContext(fmt::format("registering the receive slots for rank {}", peer)));
  LOOM_TRY(c->postFree());
  *out = std::move(c);
  return Status::Ok();
}

NetRecvConnection::~NetRecvConnection() {
  if (comm_ && region_) (void)comm_->deregisterMemory(region_);
  comm_.reset();
}

Status NetRecvConnection::postFree() {
  while (posted_ - head_ < nslots_) {
    const size_t i = posted_ % nslots_;
    void* data = slotData(i);
    const size_t size = slotBytes_ + kNoticeBytes;
    const int tag = 0;
    Slot& s = slots_[i];
    Status st = comm_->irecv(1, &data, &size, &tag, &region_, &s.request);
    if (!st.ok()) return broken_ = st.withContext(fmt::format("receive from rank {}", peer_));
    if (!s.request) break;
    s.posted = true;
    ++posted_;
  }
  return Status::Ok();
}

Status NetRecvConnection::testSlot(size_t i, bool* done) {
  Slot& s = slots_[i];
  *done = s.done;
  if (s.done || !s.posted) return Status::Ok();
  size_t bytes = 0;
  Status st = comm_->test(s.request, done, &bytes);
  if (!st.ok()) return broken_ = st.withContext(fmt::format("receive from rank {}", peer_));
  if (*done) {
    s.done = true;
    s.bytes = bytes;
  }
  return Status::Ok();
}

void NetRecvConnection::readNotice(size_t i, int* waitsOn, std::string* reason) const {
  const char* at = buffer_.data() + i * (slotBytes_ + kNoticeBytes) + slotBytes_;
  int32_t on = -1;
  std::memcpy(&on, at, sizeof on);
  *waitsOn = on;
  const char* text = at + kNoticeTextOffset;
  reason->assign(text, strnlen(text, kNoticeBytes - kNoticeTextOffset));
}

Status NetRecvConnection::noticeIn(size_t i) const {
  int waitsOn = -1;
  std::string reason;
  readNotice(i, &waitsOn, &reason);
  return errorStatus(waitsOn >= 0 ? loomTimeout : loomRemoteError, "rank {} failed: {}", peer_, reason);
}

bool NetRecvConnection::notice(int* waitsOn, std::string* reason) {
  size_t slot = 0;
  if (!findNotice(&slot).ok() || slot == SIZE_MAX) return false;
  readNotice(slot, waitsOn, reason);
  return true;
}

Status NetRecvConnection::findNotice(size_t* slot) {
  // Messages arrive in order: a notice is found only behind the messages that came before it.
  *slot = SIZE_MAX;
  for (uint64_t k = head_; k < posted_; ++k) {
    const size_t i = k % nslots_;
    bool done = false;
    LOOM_TRY(testSlot(i, &done));
    if (!done) break;
    if (slots_[i].bytes > slotBytes_) {
      *slot = i;
      break;
    }
  }
  return Status::Ok();
}

Status NetRecvConnection::tryRecv(size_t expectedBytes, const void** data) {
  *data = nullptr;
  LOOM_TRY(broken_);
  LOOM_TRY(postFree());
  if (head_ == posted_) return Status::Ok();
  const size_t i = head_ % nslots_;
  bool done = false;
  LOOM_TRY(testSlot(i, &done));
  if (!done) return Status::Ok();
  const size_t got = slots_[i].bytes;
  if (got > slotBytes_) return noticeIn(i);
  if (got != expectedBytes)
    return errorStatus(loomInvalidUsage,
                       "rank {} sent a message of {} bytes where {} were expected: the ranks called different "
                       "operations or counts",
                       peer_, got, expectedBytes);
  *data = slotData(i);
  return Status::Ok();
}

void NetRecvConnection::releaseRecv() {
  slots_[head_ % nslots_] = Slot{};
  ++head_;
  (void)postFree();  // an error stays in broken_ and is reported by the next tryRecv
}

void NetRecvConnection::addWaits(WaitList* waits) { comm_->addWaits(waits); }

Status NetRecvConnection::peerFailure() {
  size_t slot = 0;
  if (Status st = findNotice(&slot); !st.ok()) return Status(loomRemoteError, st.message());
  return slot == SIZE_MAX ? Status::Ok() : noticeIn(slot);
}

}  // namespace loom::net
