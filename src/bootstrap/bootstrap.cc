#include "bootstrap/bootstrap.h"

#include <algorithm>
#include <cstring>
#include <chrono>
#include <map>
#include <thread>

#include <fmt/ranges.h>

#include "base/log.h"
#include "bootstrap/root.h"
#include "bootstrap/table_file.h"

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

Status Bootstrap::send(const Socket& s, const void* data, size_t bytes, Deadline deadline) {
  traffic_.bytesSent += bytes;
  return sendAll(s, data, bytes, deadline, abort_);
}

Status Bootstrap::recv(const Socket& s, void* data, size_t bytes, Deadline deadline) {
  traffic_.bytesReceived += bytes;
  return recvAll(s, data, bytes, deadline, abort_);
}

Status Bootstrap::sendFrame(const Socket& s, uint32_t status, const void* data, size_t bytes, Deadline deadline) {
  Frame frame{status, static_cast<uint32_t>(bytes)};
  LOOM_TRY(send(s, &frame, sizeof(frame), deadline));
  return bytes > 0 ? send(s, data, bytes, deadline) : Status::Ok();
}

Status Bootstrap::recvFrame(const Socket& s, Deadline deadline, std::vector<char>* payload, uint32_t* status) {
  Frame frame;
  LOOM_TRY(recv(s, &frame, sizeof(frame), deadline));
  return recvFramePayload(s, frame, deadline, payload, status);
}

Status Bootstrap::recvFramePayload(const Socket& s, const Frame& frame, Deadline deadline, std::vector<char>* payload,
                                   uint32_t* status) {
  if (frame.bytes > kMaxFrameBytes) return errorStatus(loomRemoteError, "an oversized frame ({} bytes)", frame.bytes);
  payload->resize(frame.bytes);
  LOOM_TRY(recv(s, payload->data(), payload->size(), deadline));
  if (frame.status == kFrameRefused || (frame.status != kFrameOk && !status))
    return errorStatus(loomInvalidArgument, "the job was refused: {}", std::string(payload->begin(), payload->end()));
  if (status) *status = frame.status;
  return Status::Ok();
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

  SocketAddress local = self.listenAddress;
  local.port = 0;
  if (!local.valid()) LOOM_TRY(chooseLocalAddress(&local));
  LOOM_TRY(listenOn(local, &b->listener_, &self.listenAddress));
  b->traffic_.opened();
  if (id.rootStartedByRankZero && rank == 0) {
    SocketAddress bindAddr = id.root, bound;
    Socket rootListener;
    LOOM_TRY(listenOn(bindAddr, &rootListener, &bound).withContext("LOOM_COMM_ID rendezvous"));
    startRoot(std::move(rootListener), id);
  }
  JoinAnswer answer;
  LOOM_TRY(b->joinRendezvous(self, deadline, &answer).withContext("joining the rendezvous at " + id.root.toString()));
  if (answer.leaderRank == rank)
    LOOM_TRY(b->leadHost(deadline));
  else
    LOOM_TRY(b->joinLeader(answer, deadline));
  const bool allHere = std::all_of(b->table().begin(), b->table().end(),
                                   [&](const RankInfo& r) { return r.process.sameProcess(self.process); });
  if (allHere && nranks > 1) {
    b->closeTree();
    b->local_ = LocalExchange::join(id.secret, kSecretBytes, nranks);
  }
  *out = std::move(b);
  return Status::Ok();
}

Bootstrap::~Bootstrap() {
  if (local_) local_->leave(rank_);
}

// A connection the rendezvous closed before it answered is tried again: under load it sheds
// connections that stay silent (root.cc), and a rank that joins twice with the same identity is
// answered again.
Status Bootstrap::joinRendezvous(const RankInfo& self, Deadline deadline, JoinAnswer* answer) {
  std::vector<char> payload;
  for (int attempt = 0;; ++attempt) {
    Socket root;
    LOOM_TRY(connectTo(id_.root, deadline, abort_, &root));
    traffic_.opened();
    Hello hello = makeHello(HelloKind::ToRoot, 0);
    Status st = send(root, &hello, sizeof(hello), deadline);
    if (st.ok()) st = send(root, &self, sizeof(self), deadline);
    bool answered = false;
    Frame frame;
    if (st.ok()) st = recv(root, &frame, sizeof(frame), deadline);
    if (st.ok()) {
      answered = true;
      st = recvFramePayload(root, frame, deadline, &payload, nullptr);
    }
    traffic_.closed();
    if (st.ok()) break;
    if (answered || deadline.expired() || (abort_ && abort_->load())) return st;
    LOOM_INFO(Boot, "rank {}: the rendezvous closed the connection before answering ({}); joining again", rank_,
              st.message());
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(100, 5 << std::min(attempt, 4))));
  }
  if (payload.size() != sizeof(JoinAnswer))
    return errorStatus(loomRemoteError, "the rendezvous answered with {} bytes", payload.size());
  std::memcpy(answer, payload.data(), sizeof(*answer));
  if (answer->leaderRank < 0 || answer->leaderRank >= nranks_ || !answer->leaderAddress.valid())
    return errorStatus(loomRemoteError, "the rendezvous named leader rank {} at {}", answer->leaderRank,
                       answer->leaderAddress.toString());
  return Status::Ok();
}

Status Bootstrap::joinLeader(const JoinAnswer& answer, Deadline deadline) {
  const std::string who = fmt::format("rank {}, the leader of this rank's host", answer.leaderRank);
  Frame frame;
  // A leader drops a connection that stays silent past kHelloTimeoutMs (this thread may be that slow
  // under load): such a connection closes before any frame and is made again. A leader that is gone
  // refuses the next one.
  for (int attempt = 0;; ++attempt) {
    LOOM_TRY(connectTo(answer.leaderAddress, deadline, abort_, &leader_, false).withContext("connecting to " + who));
    traffic_.opened();
    Hello hello = makeHello(HelloKind::ToLeader, 0);
    Status st = send(leader_, &hello, sizeof(hello), deadline);
    if (st.ok()) st = recv(leader_, &frame, sizeof(frame), deadline);
    if (st.ok()) break;
    leader_.close();
    traffic_.closed();
    if (deadline.expired() || (abort_ && abort_->load())) return st.withContext("waiting for the table from " + who);
    LOOM_INFO(Boot, "rank {}: {} closed the connection before sending the table ({}); joining again", rank_, who,
              st.message());
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(100, 5 << std::min(attempt, 4))));
  }
  std::vector<char> table;
  uint32_t status = kFrameOk;
  LOOM_TRY(recvFramePayload(leader_, frame, deadline, &table, &status).withContext("waiting for the table from " + who));
  if (status == kFrameTableFile)
    LOOM_TRY(takeTableFile(table, deadline).withContext("the table from " + who));
  else if (status == kFrameOk)
    LOOM_TRY(adoptTable(table.data(), table.size()));
  else
    return errorStatus(loomRemoteError, "{} sent a frame of status {}", who, status);
  if (tree_.leader != answer.leaderRank)
    return errorStatus(loomRemoteError, "the table names rank {} as this host's leader, the rendezvous rank {}",
                       tree_.leader, answer.leaderRank);
  return Status::Ok();
}

Status Bootstrap::adoptTable(const void* bytes, size_t size) {
  std::shared_ptr<const RankTable> table;
  LOOM_TRY(sharedRankTable(id_.secret, bytes, size, nranks_, &table));
  return adoptTable(std::move(table));
}

Status Bootstrap::adoptTable(std::shared_ptr<const RankTable> table) {
  if (table->nranks() != nranks_) return errorStatus(loomRemoteError, "a table of {} ranks for {}", table->nranks(), nranks_);
  table_ = std::move(table);
  tree_ = BootstrapTree::of(*table_, rank_);
  return Status::Ok();
}

Status Bootstrap::takeTableFile(const std::vector<char>& refBytes, Deadline deadline) {
  TableFileRef ref;
  if (refBytes.size() != sizeof(ref)) return errorStatus(loomRemoteError, "a table file reference of {} bytes", refBytes.size());
  std::memcpy(&ref, refBytes.data(), sizeof(ref));
  ref.name[sizeof(ref.name) - 1] = '\0';
  Status st = Status::Ok();
  if (auto known = findSharedRankTable(id_.secret, ref.tableId)) {
    st = adoptTable(std::move(known));
  } else {
    st = readTableFile(ref.name, ref.bytes, [&](const void* p, size_t n) { return adoptTable(p, n); });
  }
  // The leader waits for every rank's answer before it removes the file: 1, or 0 and the bytes please.
  const char got = st.ok() ? 1 : 0;
  LOOM_TRY(send(leader_, &got, 1, deadline));
  if (st.ok()) return st;
  LOOM_INFO(Boot, "rank {}: the table file is out of reach ({}); the leader sends the bytes", rank_, st.message());
  std::vector<char> table;
  LOOM_TRY(recvFrame(leader_, deadline, &table));
  return adoptTable(table.data(), table.size());
}

Status Bootstrap::handTableToLocals(const std::vector<char>& table, Deadline deadline) {
  auto who = [&](size_t i) { return fmt::format("handing the table to rank {} of this host", tree_.locals[i]); };
  TableFile file;
  Status published = locals_.empty() ? Status::Ok() : TableFile::publish(id_.secret, table_->id, rank_, table, &file);
  if (!published.ok()) {
    LOOM_INFO(Boot, "rank {}: no table file for this host's ranks ({}); sending the bytes", rank_, published.message());
    for (size_t i = 0; i < locals_.size(); ++i)
      LOOM_TRY(sendFrame(locals_[i], kFrameOk, table.data(), table.size(), deadline).withContext(who(i)));
    return Status::Ok();
  }
  TableFileRef ref;
  std::snprintf(ref.name, sizeof(ref.name), "%s", file.name().c_str());
  ref.bytes = table.size();
  ref.tableId = table_->id;
  for (size_t i = 0; i < locals_.size(); ++i)
    LOOM_TRY(sendFrame(locals_[i], kFrameTableFile, &ref, sizeof(ref), deadline).withContext(who(i)));
  for (size_t i = 0; i < locals_.size(); ++i) {
    char got = 0;
    LOOM_TRY(recv(locals_[i], &got, 1, deadline).withContext(who(i)));
    if (got != 1) LOOM_TRY(sendFrame(locals_[i], kFrameOk, table.data(), table.size(), deadline).withContext(who(i)));
  }
  return Status::Ok();  // `file` is unlinked here: every rank of this host has the table
}

Status Bootstrap::leadHost(Deadline deadline) {
  std::map<int, Socket> early;  // ranks of this host that joined before the table came
  std::vector<char> table;
  size_t joined = 0;
  auto tellLocals = [&](const std::string& why) {
    for (auto& [r, s] : early) (void)sendFrame(s, kFrameRefused, why.data(), why.size(), Deadline::afterMs(kHelloTimeoutMs));
    for (Socket& s : locals_)
      if (s.valid()) (void)sendFrame(s, kFrameRefused, why.data(), why.size(), Deadline::afterMs(kHelloTimeoutMs));
  };
  while (!table_ || joined < tree_.locals.size()) {
    Socket s;
    Hello hello;
    Status st = acceptHello({HelloKind::ToLeader, HelloKind::FromParent}, deadline, &s, &hello);
    if (!st.ok()) {
      std::string waiting = table_ ? "this host's ranks" : "the table";
      if (table_) {
        std::vector<int> missing;
        for (size_t i = 0; i < tree_.locals.size(); ++i)
          if (!locals_[i].valid()) missing.push_back(tree_.locals[i]);
        waiting = fmt::format("rank(s) {} of this host", fmt::join(missing, ", "));
      }
      return st.withContext(fmt::format("rank {}, leading its host, waiting for {}", rank_, waiting));
    }
    traffic_.opened();
    if (hello.kind == static_cast<uint32_t>(HelloKind::ToLeader)) {
      if (!table_) {
        if (!early.emplace(hello.rank, std::move(s)).second) traffic_.closed();
        continue;
      }
      auto it = std::find(tree_.locals.begin(), tree_.locals.end(), hello.rank);
      const size_t i = static_cast<size_t>(it - tree_.locals.begin());
      if (it == tree_.locals.end() || locals_[i].valid()) {
        LOOM_WARN(Boot, "rank {}: dropped rank {}, which is not a rank of this host or joined twice", rank_, hello.rank);
        traffic_.closed();
        continue;
      }
      locals_[i] = std::move(s);
      ++joined;
      continue;
    }
    if (table_) {  // a second table: a stranger with the secret, or a bug
      LOOM_WARN(Boot, "rank {}: dropped a second table from rank {}", rank_, hello.rank);
      traffic_.closed();
      continue;
    }
    Status got = recvFrame(s, deadline, &table);
    if (got.ok()) got = adoptTable(table.data(), table.size());
    if (got.ok() && !tree_.isLeader())
      got = errorStatus(loomRemoteError, "the table names rank {} as this host's leader, the rendezvous rank {}",
                        tree_.leader, rank_);
    if (!got.ok()) {
      tellLocals(got.message());
      return got.withContext(hello.tag < 0 ? "the table from the rendezvous"
                                           : fmt::format("the table from rank {}, the parent leader", hello.rank));
    }
    if (tree_.parentLeader >= 0) {
      parent_ = std::move(s);
    } else {
      traffic_.closed();  // the rendezvous' connection: done
    }
    // Down the tree first: its depth is what a table's delivery waits for.
    children_.resize(tree_.childLeaders.size());
    for (size_t c = 0; c < tree_.childLeaders.size(); ++c) {
      const int child = tree_.childLeaders[c];
      const std::string who = fmt::format("rank {}, a child leader", child);
      Status sent = connectTo(table_->ranks[static_cast<size_t>(child)].listenAddress, deadline, abort_, &children_[c], false);
      if (sent.ok()) {
        traffic_.opened();
        Hello down = makeHello(HelloKind::FromParent, 0);
        sent = send(children_[c], &down, sizeof(down), deadline);
      }
      if (sent.ok()) sent = sendFrame(children_[c], kFrameOk, table.data(), table.size(), deadline);
      if (!sent.ok()) {
        const std::string why = fmt::format("rank {} could not hand the table to {}: {}", rank_, who, sent.message());
        tellLocals(why);
        return errorStatus(loomRemoteError, "{}", why);
      }
    }
    locals_.resize(tree_.locals.size());
    for (auto& [r, early_s] : early) {
      auto it = std::find(tree_.locals.begin(), tree_.locals.end(), r);
      if (it == tree_.locals.end()) {
        LOOM_WARN(Boot, "rank {}: dropped rank {}, which is not a rank of this host", rank_, r);
        traffic_.closed();
        continue;
      }
      locals_[static_cast<size_t>(it - tree_.locals.begin())] = std::move(early_s);
      ++joined;
    }
    early.clear();
  }
  return handTableToLocals(table, deadline);
}

void Bootstrap::closeTree() {
  auto close = [&](Socket& s) {
    if (!s.valid()) return;
    s.close();
    traffic_.closed();
  };
  close(leader_);
  close(parent_);
  for (Socket& s : children_) close(s);
  for (Socket& s : locals_) close(s);
}

Status Bootstrap::acceptHello(std::initializer_list<HelloKind> kinds, Deadline deadline, Socket* out, Hello* hello) {
  for (;;) {
    Socket s;
    LOOM_TRY(acceptOne(listener_, deadline, abort_, &s));
    Hello raw;
    Status st = recvAll(s, &raw, sizeof(raw), Deadline::afterMs(kHelloTimeoutMs), abort_);
    if (st.ok()) {
      // The kind is checked against each accepted one (the first's refusal says why when none fits).
      HelloKind kind = *kinds.begin();
      for (HelloKind k : kinds)
        if (raw.kind == static_cast<uint32_t>(k)) kind = k;
      st = parseHello(&raw, sizeof(raw), id_.secret, kind, nranks_, hello);
    }
    if (st.ok()) {
      traffic_.bytesReceived += sizeof(raw);
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
  return allGatherTree(mine, out, bytes, deadline).withContext("bootstrap allgather");
}

// Up the tree: each leader gathers its host's parts and its children's subtrees and sends its own
// subtree's parts to its parent; the root of the tree then holds every part and the whole table comes
// back down, each leader passing it to its children and its host's ranks.
Status Bootstrap::allGatherTree(const void* mine, char* out, size_t bytes, Deadline deadline) {
  const size_t total = bytes * static_cast<size_t>(nranks_);
  if (!tree_.isLeader()) {
    LOOM_TRY(send(leader_, mine, bytes, deadline).withContext(fmt::format("to rank {}, this host's leader", tree_.leader)));
    return recv(leader_, out, total, deadline).withContext(fmt::format("from rank {}, this host's leader", tree_.leader));
  }
  for (size_t i = 0; i < locals_.size(); ++i)
    LOOM_TRY(recv(locals_[i], out + static_cast<size_t>(tree_.locals[i]) * bytes, bytes, deadline)
                 .withContext(fmt::format("from rank {} of this host", tree_.locals[i])));
  std::vector<char> parts;
  for (size_t c = 0; c < children_.size(); ++c) {
    const std::vector<int>& order = tree_.childOrder[c];
    parts.resize(order.size() * bytes);
    LOOM_TRY(recv(children_[c], parts.data(), parts.size(), deadline)
                 .withContext(fmt::format("from rank {}, a child leader", tree_.childLeaders[c])));
    for (size_t k = 0; k < order.size(); ++k)
      std::memcpy(out + static_cast<size_t>(order[k]) * bytes, parts.data() + k * bytes, bytes);
  }
  if (tree_.parentLeader >= 0) {
    const std::string parent = fmt::format("rank {}, the parent leader", tree_.parentLeader);
    parts.resize(tree_.order.size() * bytes);
    for (size_t k = 0; k < tree_.order.size(); ++k)
      std::memcpy(parts.data() + k * bytes, out + static_cast<size_t>(tree_.order[k]) * bytes, bytes);
    LOOM_TRY(send(parent_, parts.data(), parts.size(), deadline).withContext("to " + parent));
    LOOM_TRY(recv(parent_, out, total, deadline).withContext("from " + parent));
  }
  for (size_t c = 0; c < children_.size(); ++c)
    LOOM_TRY(send(children_[c], out, total, deadline)
                 .withContext(fmt::format("to rank {}, a child leader", tree_.childLeaders[c])));
  for (size_t i = 0; i < locals_.size(); ++i)
    LOOM_TRY(send(locals_[i], out, total, deadline).withContext(fmt::format("to rank {} of this host", tree_.locals[i])));
  return Status::Ok();
}

Status Bootstrap::barrier() {
  if (nranks_ == 1) return Status::Ok();
  Deadline deadline = opDeadline();
  if (local_) {
    char mine = 0;
    std::vector<char> all(static_cast<size_t>(nranks_));
    return local_->allGather(rank_, &mine, all.data(), 1, deadline, abort_).withContext("bootstrap barrier (in memory)");
  }
  return barrierTree(deadline).withContext("bootstrap barrier");
}

// A byte up the tree from every rank, then a byte back down: an allGather's path without its table.
Status Bootstrap::barrierTree(Deadline deadline) {
  char token = 0;
  if (!tree_.isLeader()) {
    LOOM_TRY(send(leader_, &token, 1, deadline).withContext(fmt::format("to rank {}, this host's leader", tree_.leader)));
    return recv(leader_, &token, 1, deadline).withContext(fmt::format("from rank {}, this host's leader", tree_.leader));
  }
  for (size_t i = 0; i < locals_.size(); ++i)
    LOOM_TRY(recv(locals_[i], &token, 1, deadline).withContext(fmt::format("from rank {} of this host", tree_.locals[i])));
  for (size_t c = 0; c < children_.size(); ++c)
    LOOM_TRY(recv(children_[c], &token, 1, deadline)
                 .withContext(fmt::format("from rank {}, a child leader", tree_.childLeaders[c])));
  if (tree_.parentLeader >= 0) {
    const std::string parent = fmt::format("rank {}, the parent leader", tree_.parentLeader);
    LOOM_TRY(send(parent_, &token, 1, deadline).withContext("to " + parent));
    LOOM_TRY(recv(parent_, &token, 1, deadline).withContext("from " + parent));
  }
  for (size_t c = 0; c < children_.size(); ++c)
    LOOM_TRY(send(children_[c], &token, 1, deadline)
                 .withContext(fmt::format("to rank {}, a child leader", tree_.childLeaders[c])));
  for (size_t i = 0; i < locals_.size(); ++i)
    LOOM_TRY(send(locals_[i], &token, 1, deadline).withContext(fmt::format("to rank {} of this host", tree_.locals[i])));
  return Status::Ok();
}

Status Bootstrap::connectData(int peer, int tag, Socket* out) { return connectData(peer, tag, opDeadline(), out); }

Status Bootstrap::connectData(int peer, int tag, Deadline deadline, Socket* out) {
  LOOM_TRY(connectTo(table()[static_cast<size_t>(peer)].listenAddress, deadline, abort_, out));
  Hello hello = makeHello(HelloKind::Data, tag);
  return sendAll(*out, &hello, sizeof(hello), deadline, abort_);
}

Status Bootstrap::acceptData(Socket* out, int* fromRank, int* tag) { return acceptData(opDeadline(), out, fromRank, tag); }

Status Bootstrap::acceptData(Deadline deadline, Socket* out, int* fromRank, int* tag) {
  for (;;) {
    Hello hello;
    LOOM_TRY(acceptHello({HelloKind::Data}, deadline, out, &hello));
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
