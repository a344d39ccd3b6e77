#include "bootstrap/bootstrap.h"

#include <algorithm>
#include <cstring>

#include "base/log.h"
#include "bootstrap/root.h"

namespace loom {

Hello Bootstrap::makeHello(HelloKind kind, int tag) const {
  Hello h;
  std::memcpy(h.secret, id_.secret, kSecretBytes);
  h.kind = static_cast<uint32_t>(kind);
  h.rank = rank_;
  h.nranks = nranks_;
  h.tag = tag;
  return h;
}

Status Bootstrap::create(const UniqueIdData& id, int rank, int nranks, RankInfo self, int timeoutMs,
                         const AbortFlag* abort, std::unique_ptr<Bootstrap>* out) {
  std::unique_ptr<Bootstrap> b(new Bootstrap());
  b->id_ = id;
  b->rank_ = rank;
  b->nranks_ = nranks;
  b->timeoutMs_ = timeoutMs;
  b->abort_ = abort;
  Deadline deadline = Deadline::afterMs(timeoutMs);

  SocketAddress local;
  LOOM_TRY(chooseLocalAddress(&local));
  LOOM_TRY(listenOn(local, &b->listener_, &self.listenAddress));
  if (id.rootStartedByRankZero && rank == 0) {
    SocketAddress bindAddr = id.root, bound;
    Socket rootListener;
    LOOM_TRY(listenOn(bindAddr, &rootListener, &bound).withContext("LOOM_COMM_ID rendezvous"));
    startRoot(std::move(rootListener), id);
  }
  LOOM_TRY(b->joinRendezvous(self, deadline).withContext("joining the rendezvous at " + id.root.toString()));
  const bool allHere = std::all_of(b->table_.begin(), b->table_.end(),
                                   [&](const RankInfo& r) { return r.process.sameProcess(self.process); });
  if (allHere && nranks > 1)
    b->local_ = LocalExchange::join(id.secret, kSecretBytes, nranks);
  else
    LOOM_TRY(b->buildStar(deadline).withContext("connecting to rank 0"));
  *out = std::move(b);
  return Status::Ok();
}

Bootstrap::~Bootstrap() {
  if (local_) local_->leave(rank_);
}

Status Bootstrap::joinRendezvous(const RankInfo& self, Deadline deadline) {
  Socket root;
  LOOM_TRY(connectTo(id_.root, deadline, abort_, &root));
  Hello hello = makeHello(HelloKind::ToRoot, 0);
  LOOM_TRY(sendAll(root, &hello, sizeof(hello), deadline, abort_));
  LOOM_TRY(sendAll(root, &self, sizeof(self), deadline, abort_));
  RootReply reply;
  LOOM_TRY(recvAll(root, &reply, sizeof(reply), deadline, abort_));
  if (reply.bytes > kMaxFrameBytes) return errorStatus(loomRemoteError, "oversized reply from the rendezvous");
  std::vector<char> payload(reply.bytes);
  LOOM_TRY(recvAll(root, payload.data(), payload.size(), deadline, abort_));
  if (reply.status != 0)
    return invalidArgument("the rendezvous refused this rank: {}", std::string(payload.begin(), payload.end()));
  return parseRankTable(payload.data(), payload.size(), nranks_, &table_);
}

Status Bootstrap::buildStar(Deadline deadline) {
  if (nranks_ == 1) return Status::Ok();
  if (rank_ != 0) {
    star_.resize(1);
    LOOM_TRY(connectTo(table_[0].listenAddress, deadline, abort_, &star_[0]));
    Hello hello = makeHello(HelloKind::ToRankZero, 0);
    return sendAll(star_[0], &hello, sizeof(hello), deadline, abort_);
  }
  star_.resize(nranks_);
  for (int joined = 1; joined < nranks_;) {
    Socket s;
    Hello hello;
    LOOM_TRY(acceptHello(HelloKind::ToRankZero, deadline, &s, &hello));
    if (hello.rank <= 0 || hello.rank >= nranks_ || star_[hello.rank].valid()) {
      LOOM_WARN(Boot, "rank 0: ignoring a duplicate or out-of-range rank {}", hello.rank);
      continue;
    }
    star_[hello.rank] = std::move(s);
    ++joined;
  }
  return Status::Ok();
}

Status Bootstrap::acceptHello(HelloKind kind, Deadline deadline, Socket* out, Hello* hello) {
  for (;;) {
    Socket s;
    LOOM_TRY(acceptOne(listener_, deadline, abort_, &s));
    Hello raw;
    Status st = recvAll(s, &raw, sizeof(raw), Deadline::afterMs(kHelloTimeoutMs), abort_);
    if (st.ok()) st = parseHello(&raw, sizeof(raw), id_.secret, kind, nranks_, hello);
    if (st.ok()) {
      *out = std::move(s);
      return Status::Ok();
    }
    if (abort_ && abort_->load()) return st;
    LOOM_WARN(Boot, "rank {}: dropped a connection: {}", rank_, st.message());
  }
}

Status Bootstrap::allGather(const void* mine, void* all, size_t bytes) {
  char* out = static_cast<char*>(all);
  std::memcpy(out + static_cast<size_t>(rank_) * bytes, mine, bytes);
  if (nranks_ == 1) return Status::Ok();
  Deadline deadline = opDeadline();
  if (local_) return local_->allGather(rank_, mine, all, bytes, deadline, abort_).withContext("bootstrap allgather (in memory)");
  size_t total = bytes * static_cast<size_t>(nranks_);
  if (rank_ != 0) {
    LOOM_TRY(sendAll(star_[0], mine, bytes, deadline, abort_).withContext("bootstrap allgather: to rank 0"));
    return recvAll(star_[0], out, total, deadline, abort_).withContext("bootstrap allgather: from rank 0");
  }
  for (int r = 1; r < nranks_; ++r)
    LOOM_TRY(recvAll(star_[r], out + static_cast<size_t>(r) * bytes, bytes, deadline, abort_)
                 .withContext(fmt::format("bootstrap allgather: from rank {}", r)));
  for (int r = 1; r < nranks_; ++r)
    LOOM_TRY(sendAll(star_[r], out, total, deadline, abort_).withContext(fmt::format("bootstrap allgather: to rank {}", r)));
  return Status::Ok();
}

Status Bootstrap::barrier() {
  char mine = 0;
  std::vector<char> all(static_cast<size_t>(nranks_));
  return allGather(&mine, all.data(), 1);
}

Status Bootstrap::connectData(int peer, int tag, Socket* out) { return connectData(peer, tag, opDeadline(), out); }

Status Bootstrap::connectData(int peer, int tag, Deadline deadline, Socket* out) {
  LOOM_TRY(connectTo(table_[peer].listenAddress, deadline, abort_, out));
  Hello hello = makeHello(HelloKind::Data, tag);
  return sendAll(*out, &hello, sizeof(hello), deadline, abort_);
}

Status Bootstrap::acceptData(Socket* out, int* fromRank, int* tag) { return acceptData(opDeadline(), out, fromRank, tag); }

Status Bootstrap::acceptData(Deadline deadline, Socket* out, int* fromRank, int* tag) {
  for (;;) {
    Hello hello;
    LOOM_TRY(acceptHello(HelloKind::Data, deadline, out, &hello));
    if (hello.rank < 0 || hello.rank >= nranks_ || hello.rank == rank_) {
      LOOM_WARN(Boot, "rank {}: dropped a data connection claiming rank {}", rank_, hello.rank);
      continue;
    }
    *fromRank = hello.rank;
    *tag = hello.tag;
    return Status::Ok();
  }
}

}  // namespace loom
