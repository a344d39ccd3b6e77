// A PeerExchange for ranks that are threads of one process (the network tests' ranks).
#pragma once

#include <barrier>
#include <cstring>
#include <vector>

#include "base/exchange.h"

namespace loom {

// A PeerExchange for ranks that are threads of one process: allGather and barrier over memory. The
// network setup asks for nothing else (data connections are the bootstrap's, unused here).
class ThreadExchange final : public PeerExchange {
 public:
  struct Shared {
    explicit Shared(int nranks) : sync(nranks), records(nranks) {}
    std::barrier<> sync;
    std::vector<std::vector<char>> records;  // per rank: what it gave the allGather in progress
  };
  ThreadExchange(Shared* shared, int rank) : shared_(shared), rank_(rank) {}
  int rank() const override { return rank_; }
  int nranks() const override { return static_cast<int>(shared_->records.size()); }
  Status allGather(const void* mine, void* all, size_t bytes) override {
    const char* in = static_cast<const char*>(mine);
    shared_->records[rank_].assign(in, in + bytes);
    shared_->sync.arrive_and_wait();
    for (int r = 0; r < nranks(); ++r)
      std::memcpy(static_cast<char*>(all) + r * bytes, shared_->records[r].data(), bytes);
    shared_->sync.arrive_and_wait();  // every rank read every record before the next call overwrites one
    return Status::Ok();
  }
  Status barrier() override {
    shared_->sync.arrive_and_wait();
    return Status::Ok();
  }
  Status connectData(int, int, Socket*) override { return internalError("ThreadExchange has no data connections"); }
  Status acceptData(Socket*, int*, int*) override { return internalError("ThreadExchange has no data connections"); }

 private:
  Shared* shared_;
  int rank_;
};

}  // namespace loom
