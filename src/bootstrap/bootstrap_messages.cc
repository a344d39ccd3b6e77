// The bootstrap's messages between two ranks (bootstrap.h: sendMessage and its kin): each on a data
// connection of its own to the receiver's listener, kept in its mail until asked for; a failing rank's
// notice to many at once (tellEach); and a probe whether a rank's process is still there.
#include <poll.h>

#include <algorithm>
#include <cstring>

#include "base/log.h"
#include "bootstrap/bootstrap.h"

namespace loom {

Status Bootstrap::sendMessage(int peer, int tag, const void* data, size_t bytes) {
  return sendMessage(peer, tag, data, bytes, opDeadline());
}

Status Bootstrap::sendMessage(int peer, int tag, const void* data, size_t bytes, Deadline deadline, bool retryRefused) {
  Socket s;
  LOOM_TRY(connectTo(table()[static_cast<size_t>(peer)].listenAddress, deadline, abort_, &s, retryRefused)
               .withContext(fmt::format("a message to rank {}", peer)));
  const Hello hello = makeHello(HelloKind::Data, tag);
  const uint64_t length = bytes;
  LOOM_TRY(sendAll(s, &hello, sizeof hello, deadline, abort_));
  LOOM_TRY(sendAll(s, &length, sizeof length, deadline, abort_));
  LOOM_TRY(sendAll(s, data, bytes, deadline, abort_));
  traffic_.bytesSent += sizeof(Hello) + sizeof length + bytes;
  return Status::Ok();
}

Status Bootstrap::keepMessage(const Socket& s, int from, int tag, Deadline deadline) {
  uint64_t length = 0;
  LOOM_TRY(recvAll(s, &length, sizeof length, deadline, abort_).withContext(fmt::format("a message from rank {}", from)));
  if (length > kMaxFrameBytes)
    return errorStatus(loomInternalError, "rank {} sent a setup message of {} bytes (at most {})", from, length,
                       kMaxFrameBytes);
  std::vector<char> message(length);
  LOOM_TRY(recvAll(s, message.data(), length, deadline, abort_).withContext(fmt::format("a message from rank {}", from)));
  traffic_.bytesReceived += sizeof length + length;
  if (tag != kProbeTag) mail_[{from, tag}].push_back(std::move(message));
  return Status::Ok();
}

Status Bootstrap::recvMessage(int peer, int tag, std::vector<char>* out) {
  return recvMessage(peer, tag, out, opDeadline());
}

Status Bootstrap::recvMessage(int peer, int tag, std::vector<char>* out, Deadline deadline) {
  const auto take = [&]() -> bool {
    auto kept = mail_.find({peer, tag});
    if (kept == mail_.end() || kept->second.empty()) return false;
    *out = std::move(kept->second.front());
    kept->second.pop_front();
    return true;
  };
  for (;;) {
    {
      // The lock only while taking in what came: another thread of this rank (an operation connecting
      // to a network peer) looks at the mail meanwhile.
      std::lock_guard<std::mutex> lock(mailMutex_);
      if (take()) return Status::Ok();
      LOOM_TRY(takeArrivedMessages().withContext(fmt::format("waiting for a message (tag {:#x}) from rank {}", tag, peer)));
      if (take()) return Status::Ok();
    }
    if (abort_ && abort_->load(std::memory_order_relaxed))
      return errorStatus(loomRemoteError, "waiting for a message (tag {:#x}) from rank {}: aborted", tag, peer);
    if (deadline.expired())
      return errorStatus(loomTimeout, "waiting for a message (tag {:#x}) from rank {}: timed out", tag, peer);
    pollfd pfd{listener_.fd(), POLLIN, 0};
    (void)::poll(&pfd, 1, deadline.remainingMs(kMessagePollMs));
  }
}

Status Bootstrap::takeArrivedMessages() {
  // Called with mailMutex_ held: one thread accepts at a time.
  for (;;) {
    pollfd pfd{listener_.fd(), POLLIN, 0};
    if (::poll(&pfd, 1, 0) <= 0 || !(pfd.revents & POLLIN)) return Status::Ok();
    // A sender writes its whole message right after connecting: it comes within the hello's time.
    const Deadline deadline = Deadline::afterMs(kHelloTimeoutMs);
    Socket s;
    Hello hello;
    bool dropped = false;
    LOOM_TRY(acceptOneHello(HelloKind::Data, deadline, &s, &hello, &dropped));
    if (dropped) continue;
    if (hello.rank < 0 || hello.rank >= nranks_ || hello.rank == rank_) {
      LOOM_WARN(Boot, "rank {}: dropped a data connection claiming rank {}", rank_, hello.rank);
      continue;
    }
    LOOM_TRY(keepMessage(s, hello.rank, hello.tag, deadline));
  }
}

Status Bootstrap::arrivedFrom(int tag, std::vector<int>* senders) {
  std::lock_guard<std::mutex> lock(mailMutex_);
  senders->clear();
  LOOM_TRY(takeArrivedMessages());
  for (const auto& [key, messages] : mail_)
    if (key.second == tag && !messages.empty()) senders->push_back(key.first);
  return Status::Ok();
}

void Bootstrap::tellEach(const std::vector<int>& peers, int tag, const void* data, size_t bytes, int64_t withinMs) {
  // Every connection started at once, each message written as its connection comes up: a peer that
  // cannot be reached (a cut link) costs the others nothing, and all of them at most `withinMs`.
  struct Outgoing {
    int peer;
    Socket socket;
    std::vector<char> bytes;  // the hello, the length and the message
    size_t sent = 0;
    bool connected = false;
  };
  const Hello hello = makeHello(HelloKind::Data, tag);
  const uint64_t length = bytes;
  std::vector<Outgoing> out;
  for (int peer : peers) {
    Outgoing o{peer, Socket(), {}, 0, false};
    o.bytes.resize(sizeof hello + sizeof length + bytes);
    std::memcpy(o.bytes.data(), &hello, sizeof hello);
    std::memcpy(o.bytes.data() + sizeof hello, &length, sizeof length);
    if (bytes) std::memcpy(o.bytes.data() + sizeof hello + sizeof length, data, bytes);
    out.push_back(std::move(o));
  }
  const Deadline deadline = Deadline::afterMs(withinMs);
  while (!out.empty() && !deadline.expired()) {
    // A connection that could not start (no descriptor free yet: a failing rank is often out of them)
    // is tried again on the next round.
    for (Outgoing& o : out)
      if (!o.socket.valid()) (void)startConnect(table()[static_cast<size_t>(o.peer)].listenAddress, &o.socket);
    std::vector<pollfd> fds;
    for (const Outgoing& o : out) fds.push_back(pollfd{o.socket.fd(), POLLOUT, 0});  // -1 is ignored by poll
    if (::poll(fds.data(), fds.size(), std::max(1, std::min(deadline.remainingMs(100), 10))) <= 0) continue;
    for (size_t i = out.size(); i-- > 0;) {
      Outgoing& o = out[i];
      if (!o.socket.valid() || !fds[i].revents) continue;
      bool finished = false;
      if (!o.connected) {
        o.connected = connectOutcome(o.socket, table()[static_cast<size_t>(o.peer)].listenAddress).ok();
        finished = !o.connected;  // refused: its process is gone, nobody to tell
      }
      if (o.connected) {
        size_t moved = 0;
        finished = !sendSome(o.socket, o.bytes.data() + o.sent, o.bytes.size() - o.sent, &moved).ok();
        o.sent += moved;
        if (o.sent == o.bytes.size()) {
          traffic_.bytesSent += o.bytes.size();
          finished = true;
        }
      }
      if (finished) {
        out[i] = std::move(out.back());
        out.pop_back();
      }
    }
  }
  for (const Outgoing& o : out) LOOM_INFO(Boot, "rank {}: could not tell rank {} within {} ms", rank_, o.peer, withinMs);
}

Status Bootstrap::probePeer(int peer) {
  // An empty message under a tag nobody receives: the peer drops it when it next takes its mail.
  const Status st = sendMessage(peer, kProbeTag, nullptr, 0, Deadline::afterMs(kHelloTimeoutMs));
  if (st.ok() || st.code() == loomTimeout) return Status::Ok();  // a timeout: busy, or far; not known gone
  return errorStatus(loomRemoteError, "rank {} is gone (its bootstrap listener refuses connections: {})", peer,
                     st.message());
}

}  // namespace loom
