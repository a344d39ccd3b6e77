// A PeerExchange for ranks that are threads of one process (the network tests' ranks).
#pragma once

#include <barrier>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "base/exchange.h"

namespace loom {

// A PeerExchange for ranks that are threads of one process: allGather, barrier and messages over
// memory: what the network setup asks for.
class ThreadExchange final : public PeerExchange {
 public:
  struct Shared {
    explicit Shared(int nranks) : sync(nranks), records(nranks) {}
    std::barrier<> sync;
    std::vector<std::vector<char>> records;  // per rank: what it gave the allGather in progress
    std::mutex mailMutex;
    std::condition_variable mailChanged;
    std::map<std::tuple<int, int, int>, std::deque<std::vector<char>>> mail;  // (from, to, tag)
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
    bytesReceived_ += static_cast<uint64_t>(nranks()) * bytes;
    shared_->sync.arrive_and_wait();  // every rank read every record before the next call overwrites one
    return Status::Ok();
  }
  Status barrier() override {
    shared_->sync.arrive_and_wait();
    return Status::Ok();
  }
  Status sendMessage(int peer, int tag, const void* data, size_t bytes) override {
    const char* in = static_cast<const char*>(data);
    std::lock_guard<std::mutex> lock(shared_->mailMutex);
    shared_->mail[{rank_, peer, tag}].emplace_back(in, in + bytes);
    shared_->mailChanged.notify_all();
    return Status::Ok();
  }
  Status recvMessage(int peer, int tag, std::vector<char>* out) override {
    std::unique_lock<std::mutex> lock(shared_->mailMutex);
    auto& queue = shared_->mail[{peer, rank_, tag}];
    shared_->mailChanged.wait(lock, [&] { return !queue.empty(); });
    *out = std::move(queue.front());
    queue.pop_front();
    bytesReceived_ += out->size();
    return Status::Ok();
  }
  Status arrivedFrom(int tag, std::vector<int>* senders) override {
    std::lock_guard<std::mutex> lock(shared_->mailMutex);
    senders->clear();
    for (const auto& [key, queue] : shared_->mail)
      if (std::get<1>(key) == rank_ && std::get<2>(key) == tag && !queue.empty()) senders->push_back(std::get<0>(key));
    return Status::Ok();  // (from, to, tag) order: senders in rank order
  }
  void tellEach(const std::vector<int>& peers, int tag, const void* data, size_t bytes, int64_t) override {
    for (int peer : peers) (void)sendMessage(peer, tag, data, bytes);
  }
  Status probePeer(int) override { return Status::Ok(); }  // threads of this process: always there
  // What this rank received so far (every allGather's whole table, every message).
  uint64_t bytesReceived() const { return bytesReceived_; }

 private:
  Shared* shared_;
  int rank_;
  uint64_t bytesReceived_ = 0;
};

}  // namespace loom
