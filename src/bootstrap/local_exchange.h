// The setup exchanges (allGather, barrier) of a communicator whose ranks are all threads of this
// process (loomCommInitAll, or loomCommInitRank called by several threads): through memory, not
// through the star of TCP connections at rank 0. Through the star, rank 0 received every rank's part
// and sent the whole table back to every rank over loopback TCP: n^2 parts copied through the kernel
// by one thread, the most of a 1024-rank init once its FIFOs were lazy (docs/PERFORMANCE.md, "Init").
// Here each rank copies its part in and the table out: n parts per rank, plain memory copies.
//
// A rank whose bootstrap goes while others wait (its init failed, or its communicator was destroyed)
// fails their exchanges at once, naming it, as its closed sockets did through the star.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/socket.h"
#include "base/status.h"

namespace loom {

class LocalExchange {
 public:
  // The exchange of the communicator with this secret and size, made by its first rank to ask.
  static std::shared_ptr<LocalExchange> join(const uint8_t* secret, size_t secretBytes, int nranks);

  explicit LocalExchange(int nranks) : nranks_(nranks) {}
  // Every rank's `bytes` into `all` (nranks * bytes, in rank order), once every rank arrived.
  Status allGather(int rank, const void* mine, void* all, size_t bytes, Deadline deadline, const AbortFlag* abort);
  // `rank` is gone: exchanges waiting now and later fail, naming it.
  void leave(int rank);

  // What the first rank to ask for `name` made with `make` (the object and how making it went), for
  // every rank that asks for it: setup work whose inputs every rank holds alike (an exchange's result,
  // this process's host graph) done once per process instead of once per rank thread, which made it
  // O(n^2) work and memory in a process of n rank threads. A rank asking meanwhile waits for it.
  struct Made {
    Status status;
    std::shared_ptr<const void> object;
  };
  Made makeOnce(const std::string& name, const std::function<Made()>& make);

 private:
  // Waits (under `lock`) until `done` holds; an error on the deadline, an abort or a rank that left.
  template <class Done>
  Status waitFor(std::unique_lock<std::mutex>& lock, Done done, Deadline deadline, const AbortFlag* abort);

  const int nranks_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<char> table_;  // this round's parts
  size_t partBytes_ = 0;
  int arrived_ = 0;          // ranks whose part is in (this round)
  int copied_ = 0;           // ranks that copied the table out (this round)
  bool copying_ = false;     // every part is in: ranks copy out; the next round waits
  uint64_t round_ = 0;
  int left_ = -1;            // a rank that left (its bootstrap went), or -1
  std::mutex madeMutex_;     // held while one rank makes a shared object
  std::map<std::string, Made> made_;
};

}  // namespace loom
