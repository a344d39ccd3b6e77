// A communicator's bootstrap network: every rank's table of peers (from the rendezvous) and a star of
// TCP connections centred on rank 0 for the small collective exchanges of setup (allGather, barrier),
// or, where every rank is a thread of this process, those exchanges through memory (local_exchange.h).
// Its listener also accepts the socket transport's data connections, each authenticated by a Hello.
#pragma once

#include <memory>
#include <vector>

#include "base/exchange.h"
#include "base/socket.h"
#include "bootstrap/local_exchange.h"
#include "bootstrap/unique_id.h"
#include "bootstrap/wire.h"

namespace loom {

class Bootstrap final : public PeerExchange {
 public:
  // `self` describes this rank (its listen address is filled in here). Blocks until every rank joined.
  static Status create(const UniqueIdData& id, int rank, int nranks, RankInfo self, int timeoutMs,
                       const AbortFlag* abort, std::unique_ptr<Bootstrap>* out);
  ~Bootstrap() override;  // the other ranks' exchanges in memory, if any, fail from now on, naming this rank

  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  const std::vector<RankInfo>& table() const { return table_; }

  Status allGather(const void* mine, void* all, size_t bytes) override;
  Status barrier() override;
  Status connectData(int peer, int tag, Socket* out) override;
  Status acceptData(Socket* out, int* fromRank, int* tag) override;
  // The same, by `deadline` instead of the communicator's timeout (a shrink waits as long as the
  // communicator it makes may: core/api/api_elastic.cc).
  Status connectData(int peer, int tag, Deadline deadline, Socket* out);
  Status acceptData(Deadline deadline, Socket* out, int* fromRank, int* tag);

 private:
  Bootstrap() = default;
  Deadline opDeadline() const { return Deadline::afterMs(timeoutMs_); }
  Status joinRendezvous(const RankInfo& self, Deadline deadline);
  Status buildStar(Deadline deadline);
  // Accepts connections until one presents a valid Hello of `kind`.
  Status acceptHello(HelloKind kind, Deadline deadline, Socket* out, Hello* hello);
  Hello makeHello(HelloKind kind, int tag) const;

  UniqueIdData id_;
  int rank_ = 0;
  int nranks_ = 1;
  int timeoutMs_ = 0;
  const AbortFlag* abort_ = nullptr;
  Socket listener_;
  std::vector<RankInfo> table_;
  std::vector<Socket> star_;  // rank 0: one per rank (index 0 unused); others: star_[0] to rank 0
  std::shared_ptr<LocalExchange> local_;  // every rank a thread of this process: no star
};

}  // namespace loom
