// A communicator's bootstrap network: every rank's table of peers (from the rendezvous, root.h) and
// the connections for the small collective exchanges of setup (allGather, barrier): each host's ranks
// joined to the rank that leads their host, and the leaders joined in a tree (bootstrap_tree.h), or,
// where every rank is a thread of this process, those exchanges through memory (local_exchange.h).
// Its listener also takes data connections, each authenticated by a Hello: messages between two ranks
// (sendMessage: the network transports' handles, at setup or on first use; a shrink's id).
#pragma once

#include <deque>
#include <map>
#include <mutex>
#include <memory>
#include <vector>

#include "base/exchange.h"
#include "base/socket.h"
#include "bootstrap/bootstrap_tree.h"
#include "bootstrap/local_exchange.h"
#include "bootstrap/rank_table.h"
#include "bootstrap/traffic.h"
#include "bootstrap/unique_id.h"
#include "bootstrap/wire.h"

namespace loom {

class Bootstrap final : public PeerExchange {
 public:
  // `self` describes this rank; its listen address is filled in here (where it holds a valid
  // address already, the listener is bound to that address's interface). Blocks until every rank
  // joined and this rank has the table.
  static Status create(const UniqueIdData& id, int rank, int nranks, RankInfo self, int timeoutMs,
                       const AbortFlag* abort, std::unique_ptr<Bootstrap>* out);
  ~Bootstrap() override;  // the other ranks' exchanges in memory, if any, fail from now on, naming this rank

  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  const std::vector<RankInfo>& table() const { return table_->ranks; }
  const BootstrapTree& tree() const { return tree_; }
  const BootstrapTraffic& traffic() const { return traffic_; }
  // Where every rank is a thread of this process: their exchanges in memory, which also hold what they
  // make once for all of them (LocalExchange::makeOnce). Null otherwise.
  LocalExchange* localExchange() const { return local_.get(); }

  Status allGather(const void* mine, void* all, size_t bytes) override;
  Status barrier() override;
  // Each message on a data connection of its own (a Hello with the tag, then its length and bytes),
  // so that a peer's sends never wait for this rank's receives; one that arrives before its receive is
  // kept (`mail_`).
  Status sendMessage(int peer, int tag, const void* data, size_t bytes) override;
  Status recvMessage(int peer, int tag, std::vector<char>* out) override;
  // As above, by `deadline` (a shrink waits as long as the communicator it makes may). A refused
  // connection fails at once (the peer listened before it joined the table: its process is gone), or
  // with `retryRefused` is tried again until the deadline: a shrink's first rank then fails when the
  // ranks it did reach give up on the child it handed them, not before them.
  Status sendMessage(int peer, int tag, const void* data, size_t bytes, Deadline deadline, bool retryRefused = false);
  Status recvMessage(int peer, int tag, std::vector<char>* out, Deadline deadline);
  Status arrivedFrom(int tag, std::vector<int>* senders) override;
  void tellEach(const std::vector<int>& peers, int tag, const void* data, size_t bytes, int64_t withinMs) override;
  // A data connection to the peer's listener, closed at once: refused when its process is gone (the
  // listener was up before the peer joined the table).
  Status probePeer(int peer) override;

 private:
  Bootstrap() = default;
  Deadline opDeadline() const { return Deadline::afterMs(timeoutMs_); }
  // A rank that does not lead its host: joins its leader (host_election.h) and receives the table
  // from it. `noLeader`: nobody held the host's name, or the leader went before answering.
  Status joinLeader(const RankInfo& self, Deadline deadline, bool* noLeader);
  // A host's leader: sends the rendezvous its own record and its host's ranks' as they join, receives
  // the table from it (host 0) or from its parent leader, passes the table to its child leaders and
  // to its host's ranks.
  Status leadHost(const RankInfo& self, Socket hostListener, Deadline deadline);
  void joinLocals(const Socket& hostListener, std::vector<char>* records, std::map<int, Socket>* joined);
  Status adoptTable(const void* bytes, size_t size);
  Status adoptTable(std::shared_ptr<const RankTable> table);
  // A leader: the table to its host's ranks, through a shared-memory file where they can open it.
  Status handTableToLocals(const std::vector<char>& table, Deadline deadline);
  // A rank whose leader put the table in a file (`ref`): the table of this process, or the file's.
  Status takeTableFile(const std::vector<char>& ref, Deadline deadline);
  void closeTree();  // every rank is a thread of this process: exchanges go through memory instead
  Status allGatherTree(const void* mine, char* out, size_t bytes, Deadline deadline);
  Status barrierTree(Deadline deadline);

  // Accepts connections until one presents a valid Hello of `kind`.
  Status acceptHello(HelloKind kind, Deadline deadline, Socket* out, Hello* hello);
  // One connection: *dropped (and Ok) when it was a stranger's (no valid Hello of `kind`).
  Status acceptOneHello(HelloKind kind, Deadline deadline, Socket* out, Hello* hello, bool* dropped);
  Hello makeHello(HelloKind kind, int tag) const;
  Status send(const Socket& s, const void* data, size_t bytes, Deadline deadline);
  Status recv(const Socket& s, void* data, size_t bytes, Deadline deadline);
  Status sendFrame(const Socket& s, uint32_t status, const void* data, size_t bytes, Deadline deadline);
  // A frame's payload and status (kFrameOk, kFrameTableFile); a frame that carries a failure becomes
  // an error with its reason.
  Status recvFrame(const Socket& s, Deadline deadline, std::vector<char>* payload, uint32_t* status = nullptr);
  Status recvFramePayload(const Socket& s, const Frame& frame, Deadline deadline, std::vector<char>* payload,
                          uint32_t* status);

  UniqueIdData id_;
  int rank_ = 0;
  int nranks_ = 1;
  int timeoutMs_ = 0;
  const AbortFlag* abort_ = nullptr;
  Socket listener_;
  std::shared_ptr<const RankTable> table_;
  BootstrapTree tree_;
  Socket leader_;               // a rank that does not lead: to its host's leader
  Socket parent_;               // a leader: from its parent leader (none at host 0)
  std::vector<Socket> children_;  // a leader: to its child leaders (tree_.childLeaders)
  std::vector<Socket> locals_;    // a leader: from its host's other ranks (tree_.locals)
  std::shared_ptr<LocalExchange> local_;  // every rank a thread of this process: no sockets
  BootstrapTraffic traffic_;
  // Takes in the messages whose connections wait on the listener now, without waiting for more.
  Status takeArrivedMessages();
  // Reads one message (its length and bytes) from a data connection and keeps it in `mail_`.
  Status keepMessage(const Socket& s, int from, int tag, Deadline deadline);

  std::mutex mailMutex_;  // over mail_ and the listener's accepts: one thread takes in messages at a time
  std::map<std::pair<int, int>, std::deque<std::vector<char>>> mail_;  // (from, tag) -> messages come early
};

}  // namespace loom
