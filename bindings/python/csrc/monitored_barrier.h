// torch.distributed.monitored_barrier with Gloo's semantics: every other rank reports to rank 0,
// which waits for each until the timeout and then names the ranks that did not arrive (the first
// one, or with waitAllRanks all of them); only when all arrived does rank 0 release them, so either
// every rank passes or none does.
//
// It runs over the group's c10d Store, not the Loom communicator: a Loom receive that never
// matches could not be withdrawn, and the communicator's later operations would wait behind it.
// A health check also must not wait behind the operations it is meant to diagnose.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include <torch/csrc/distributed/c10d/Store.hpp>

namespace loomtorch {

class MonitoredBarrier {
 public:
  // `keyPrefix` is unique to one creation of the group (Comm::storePrefix).
  MonitoredBarrier(c10::intrusive_ptr<c10d::Store> store, int rank, int size, std::string keyPrefix);

  // Throws c10::DistBackendError naming the ranks that did not arrive (rank 0), or saying that rank
  // 0 did not release this rank in time (the others).
  void run(std::chrono::milliseconds timeout, bool waitAllRanks);

 private:
  using Clock = std::chrono::steady_clock;
  // Whether `key` was set before `deadline` (checked at least once, however late).
  bool waitForKey(const std::string& key, Clock::time_point deadline);
  void collect(const std::string& prefix, std::chrono::milliseconds timeout, bool waitAllRanks);

  c10::intrusive_ptr<c10d::Store> store_;
  int rank_, size_;
  std::string keyPrefix_;
  uint64_t calls_ = 0;  // each call has keys of its own; every rank calls in the same order
};

}  // namespace loomtorch
