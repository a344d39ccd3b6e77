#include "bootstrap/bootstrap.h"

#include <poll.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <map>
#include <thread>

#include <fmt/ranges.h>

#include "base/log.h"
#include "bootstrap/host_election.h"
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
  // Every connection to this listener starts with a Hello, so the kernel hands over a connection only
  // once its first bytes are in: a connecting rank whose thread stalls between its connect and its
  // send (tens of thousands of threads per core: perf/bootstrap_scale at 64k) is never read with a
  // Hello deadline that has already started, and a stranger that says nothing is never accepted.
  const int deferSeconds = 30;  // how long the kernel keeps a connection that says nothing
  setsockopt(b->listener_.fd(), IPPROTO_TCP, TCP_DEFER_ACCEPT, &deferSeconds, sizeof(deferSeconds));
  if (id.rootStartedByRankZero && rank == 0) {
    SocketAddress bindAddr = id.root, bound;
    Socket rootListener;
    LOOM_TRY(listenOn(bindAddr, &rootListener, &bound).withContext("LOOM_COMM_ID rendezvous"));
    startRoot(std::move(rootListener), id);
  }
  // The first rank of this host to claim its name leads it; the others join that leader. A leader
  // that went before this rank reached it leaves the name free: claim it again.
  for (int attempt = 0;; ++attempt) {
    Socket hostListener;
    bool leads = false;
    LOOM_TRY(claimHostLeadership(id.secret, self.process.hostHash, &hostListener, &leads));
    if (leads) {
      b->traffic_.opened();
      LOOM_TRY(b->leadHost(self, std::move(hostListener), deadline));
      break;
    }
    bool noLeader = false;
    Status st = b->joinLeader(self, deadline, &noLeader);
    if (st.ok()) break;
    if (!noLeader || deadline.expired() || (abort && abort->load())) return st;
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(20, 1 << std::min(attempt, 4))));
  }
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

Status Bootstrap::joinLeader(const RankInfo& self, Deadline deadline, bool* noLeader) {
  LOOM_TRY(connectToHostLeader(id_.secret, self.process.hostHash, deadline, &leader_, noLeader));
  traffic_.opened();
  Hello hello = makeHello(HelloKind::ToLeader, 0);
  Status st = send(leader_, &hello, sizeof(hello), deadline);
  if (st.ok()) st = send(leader_, &self, sizeof(self), deadline);
  int32_t leaderRank = -1;  // the leader's answer: its rank, once this rank's record is on its way
  if (st.ok()) st = recv(leader_, &leaderRank, sizeof(leaderRank), deadline);
  if (!st.ok()) {
    // Closed before the leader took this rank (it dropped the connection, or went): claim or join
    // again. Once taken, the record is the rendezvous': a leader that goes after that fails the job.
    leader_.close();
    traffic_.closed();
    *noLeader = !deadline.expired();
    return st.withContext("joining this host's leader");
  }
  const std::string who = fmt::format("rank {}, this host's leader", leaderRank);
  Frame frame;
  LOOM_TRY(recv(leader_, &frame, sizeof(frame), deadline).withContext("waiting for the table from " + who));
  std::vector<char> table;
  uint32_t status = kFrameOk;
  LOOM_TRY(recvFramePayload(leader_, frame, deadline, &table, &status).withContext("waiting for the table from " + who));
  if (status == kFrameTableFile)
    LOOM_TRY(takeTableFile(table, deadline).withContext("the table from " + who));
  else if (status == kFrameOk)
    LOOM_TRY(adoptTable(table.data(), table.size()));
  else
    return errorStatus(loomRemoteError, "{} sent a frame of status {}", who, status);
  if (tree_.isLeader()) return errorStatus(loomRemoteError, "the table names this rank as its host's leader");
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

// Serves two sockets until the table comes: the host's name (its ranks join) and this rank's listener
// (the table, or the job's failure, from the rendezvous for host 0 or from the parent leader). The
// records of the ranks that joined (this one's first) go to the rendezvous in batches, each on a
// short connection: it holds no socket per host.
Status Bootstrap::leadHost(const RankInfo& self, Socket hostListener, Deadline deadline) {
  std::map<int, Socket> joined;  // this host's other ranks, by rank
  auto tellLocals = [&](const std::string& why) {
    for (auto& [r, s] : joined) (void)sendFrame(s, kFrameRefused, why.data(), why.size(), Deadline::afterMs(kHelloTimeoutMs));
  };
  std::vector<char> records(sizeof(Hello) + sizeof(RankInfo));
  Hello hello = makeHello(HelloKind::ToRoot, rank_);  // tag: the leader the record came through
  std::memcpy(records.data(), &hello, sizeof(hello));
  std::memcpy(records.data() + sizeof(hello), &self, sizeof(self));
  std::vector<char> table;
  Socket from;  // where the table came from: the parent leader (kept), or the rendezvous
  while (!table_) {
    if (!records.empty()) {
      Socket root;
      Status st = connectTo(id_.root, deadline, abort_, &root);
      if (st.ok()) st = send(root, records.data(), records.size(), deadline);
      if (!st.ok()) {
        tellLocals(st.message());
        return st.withContext("joining the rendezvous at " + id_.root.toString());
      }
      records.clear();
    }
    pollfd fds[2] = {{hostListener.fd(), POLLIN, 0}, {listener_.fd(), POLLIN, 0}};
    if (deadline.expired())
      return errorStatus(loomTimeout, "rank {}, leading its host with {} other rank(s) joined, waiting for the table: timed out",
                         rank_, joined.size());
    if (abort_ && abort_->load()) return errorStatus(loomRemoteError, "rank {}: aborted while leading its host", rank_);
    if (::poll(fds, 2, deadline.remainingMs(abort_ ? 50 : 1000)) < 0 && errno != EINTR)
      return systemError("poll: {}", std::strerror(errno));
    if (fds[0].revents) joinLocals(hostListener, &records, &joined);
    if (fds[1].revents) {
      // One connection per poll: a stranger's is dropped and the loop goes on serving this host's
      // ranks (waiting here for another connection would keep them from joining, and the table
      // waits for their records: a port scanner would stall the job until its timeout).
      Socket s;
      Hello h;
      bool dropped = false;
      LOOM_TRY(acceptOneHello(HelloKind::FromParent, deadline, &s, &h, &dropped));
      if (dropped) continue;
      traffic_.opened();
      const std::string source =
          h.tag < 0 ? std::string("the rendezvous") : fmt::format("rank {}, the parent leader", h.rank);
      Status got = recvFrame(s, deadline, &table);
      if (got.ok()) got = adoptTable(table.data(), table.size());
      if (!got.ok()) {
        tellLocals(got.message());
        return got.withContext(source);
      }
      if (h.tag < 0) {
        traffic_.closed();  // the rendezvous' connection: done
      } else {
        from = std::move(s);
      }
    }
  }
  if (!tree_.isLeader())
    return errorStatus(loomRemoteError, "the table names rank {} as this host's leader, not this rank", tree_.leader);
  if (tree_.parentLeader >= 0) {
    if (!from.valid()) return errorStatus(loomRemoteError, "the rendezvous sent the table to a leader of host {}", tree_.host);
    parent_ = std::move(from);
  }
  // Down the tree first: its depth is what a table's delivery waits for.
  children_.resize(tree_.childLeaders.size());
  for (size_t c = 0; c < tree_.childLeaders.size(); ++c) {
    const int child = tree_.childLeaders[c];
    Status sent = connectTo(table_->ranks[static_cast<size_t>(child)].listenAddress, deadline, abort_, &children_[c], false);
    if (sent.ok()) {
      traffic_.opened();
      Hello down = makeHello(HelloKind::FromParent, 0);
      sent = send(children_[c], &down, sizeof(down), deadline);
    }
    if (sent.ok()) sent = sendFrame(children_[c], kFrameOk, table.data(), table.size(), deadline);
    if (!sent.ok()) {
      const std::string why =
          fmt::format("rank {} could not hand the table to rank {}, a child leader: {}", rank_, child, sent.message());
      tellLocals(why);
      return errorStatus(loomRemoteError, "{}", why);
    }
  }
  locals_.resize(tree_.locals.size());
  for (size_t i = 0; i < tree_.locals.size(); ++i) {
    auto it = joined.find(tree_.locals[i]);
    if (it == joined.end())
      return errorStatus(loomRemoteError, "rank {} of this host is in the table but never joined its leader", tree_.locals[i]);
    locals_[i] = std::move(it->second);
  }
  hostListener.close();  // every rank of this host is here: the name is free again
  traffic_.closed();
  return handTableToLocals(table, deadline);
}

// The ranks of this host that connected: each one's Hello and RankInfo; its record is queued for the
// rendezvous (which checks it against the job: the rank count, the version). Strangers are dropped.
void Bootstrap::joinLocals(const Socket& hostListener, std::vector<char>* records, std::map<int, Socket>* joined) {
  for (;;) {
    const int fd = ::accept4(hostListener.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    Socket s(fd);
    const Deadline helloDeadline = Deadline::afterMs(kHelloTimeoutMs);
    char record[sizeof(Hello) + sizeof(RankInfo)] = {0};
    Hello raw, hello;
    Status st = recvAll(s, &raw, sizeof(raw), helloDeadline, abort_);
    if (st.ok()) st = parseHello(&raw, sizeof(raw), id_.secret, HelloKind::ToLeader, 0, &hello);
    const bool otherVersion = !st.ok() && raw.magic == kWireMagic && raw.version != kWireVersion &&
                              std::memcmp(raw.secret, id_.secret, kSecretBytes) == 0;
    if (!st.ok() && !otherVersion) {
      LOOM_WARN(Boot, "rank {}: dropped a connection to this host's leader: {}", rank_, st.message());
      continue;
    }
    raw.kind = static_cast<uint32_t>(HelloKind::ToRoot);
    raw.tag = rank_;
    std::memcpy(record, &raw, sizeof(raw));
    // A rank of another version sent a RankInfo of its own shape: the rendezvous reads its Hello only.
    if (!otherVersion && !recvAll(s, record + sizeof(raw), sizeof(RankInfo), helloDeadline, abort_).ok()) {
      LOOM_WARN(Boot, "rank {}: rank {} hung up while joining this host", rank_, hello.rank);
      continue;
    }
    traffic_.bytesReceived += sizeof(record);
    if (otherVersion) {  // the rendezvous fails the job, and this leader tells its ranks why
      records->insert(records->end(), record, record + sizeof(record));
      continue;
    }
    if (joined->count(hello.rank)) {
      LOOM_WARN(Boot, "rank {}: rank {} joined this host twice", rank_, hello.rank);
      continue;
    }
    const int32_t me = rank_;
    if (!send(s, &me, sizeof(me), helloDeadline).ok()) continue;  // it went: it joins again, or never
    records->insert(records->end(), record, record + sizeof(record));
    joined->emplace(hello.rank, std::move(s));
    traffic_.opened();
  }
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

Status Bootstrap::acceptHello(HelloKind kind, Deadline deadline, Socket* out, Hello* hello) {
  for (;;) {
    bool dropped = false;
    LOOM_TRY(acceptOneHello(kind, deadline, out, hello, &dropped));
    if (!dropped) return Status::Ok();
  }
}

Status Bootstrap::acceptOneHello(HelloKind kind, Deadline deadline, Socket* out, Hello* hello, bool* dropped) {
  *dropped = false;
  Socket s;
  LOOM_TRY(acceptOne(listener_, deadline, abort_, &s));
  Hello raw;
  Status st = recvAll(s, &raw, sizeof(raw), Deadline::afterMs(kHelloTimeoutMs), abort_);
  if (st.ok()) st = parseHello(&raw, sizeof(raw), id_.secret, kind, nranks_, hello);
  if (st.ok()) {
    traffic_.bytesReceived += sizeof(raw);
    *out = std::move(s);
    return Status::Ok();
  }
  if (abort_ && abort_->load()) return st;
  LOOM_WARN(Boot, "rank {}: dropped a connection: {}", rank_, st.message());
  *dropped = true;
  return Status::Ok();
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

}  // namespace loom
