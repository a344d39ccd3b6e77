#include "monitored_barrier.h"

#include <algorithm>
#include <thread>
#include <vector>

#include <c10/util/Exception.h>
#include <c10/util/StringUtil.h>

namespace loomtorch {

namespace {

// The store is polled (check) rather than waited on: Store::wait reports a timeout and a broken
// store alike, and only the first means that a rank did not arrive.
constexpr auto kFirstPoll = std::chrono::milliseconds(1);
constexpr auto kMaxPoll = std::chrono::milliseconds(20);

[[noreturn]] void fail(const std::string& msg) { C10_THROW_ERROR(DistBackendError, msg); }

}  // namespace

MonitoredBarrier::MonitoredBarrier(c10::intrusive_ptr<c10d::Store> store, int rank, int size, std::string keyPrefix)
    : store_(std::move(store)), rank_(rank), size_(size), keyPrefix_(std::move(keyPrefix)) {}

bool MonitoredBarrier::waitForKey(const std::string& key, Clock::time_point deadline) {
  auto pause = kFirstPoll;
  for (;;) {
    if (store_->check({key})) return true;
    auto now = Clock::now();
    if (now >= deadline) return false;
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, kMaxPoll);
  }
}

void MonitoredBarrier::run(std::chrono::milliseconds timeout, bool waitAllRanks) {
  const std::string prefix = keyPrefix_ + "monitored_barrier/" + std::to_string(calls_++) + "/";
  if (size_ == 1) return;
  if (rank_ == 0) {
    collect(prefix, timeout, waitAllRanks);
    store_->set(prefix + "release", std::vector<uint8_t>{1});
    return;
  }
  store_->set(prefix + "arrived/" + std::to_string(rank_), std::vector<uint8_t>{1});
  if (!waitForKey(prefix + "release", Clock::now() + timeout)) {
    // Gloo's wording (its tests and users' scripts look for it); rank 0's error names the culprits.
    fail(c10::str("Rank ", rank_,
                  " successfully reached monitoredBarrier, but received errors while waiting for send/recv from rank "
                  "0: rank 0 did not release the barrier within ",
                  timeout.count(), " ms. Please check rank 0 logs for faulty rank."));
  }
}

void MonitoredBarrier::collect(const std::string& prefix, std::chrono::milliseconds timeout, bool waitAllRanks) {
  const auto deadline = Clock::now() + timeout;
  std::vector<int> arrived, missing;
  for (int r = 1; r < size_; ++r) {
    const std::string key = prefix + "arrived/" + std::to_string(r);
    if (store_->check({key})) {
      arrived.push_back(r);
      continue;
    }
    // Without waitAllRanks the first rank missing is reported; rank 0's own time running out
    // before it could wait for a rank is told apart, as Gloo does (a timeout of 0 always ends so).
    if (!waitAllRanks && Clock::now() >= deadline) {
      std::vector<int> unasked;
      for (int q = r; q < size_; ++q) unasked.push_back(q);
      fail(c10::str("Rank 0 timed out in monitoredBarrier after ", timeout.count(), " ms; ranks that arrived: ",
                    arrived.empty() ? "none" : c10::Join(", ", arrived), "; not waited for: ", c10::Join(", ", unasked)));
    }
    if (waitForKey(key, deadline)) {
      arrived.push_back(r);
      continue;
    }
    if (!waitAllRanks)
      fail(c10::str("[Rank 0]: Rank ", r, " failed to pass monitoredBarrier in ", timeout.count(), " ms"));
    missing.push_back(r);
  }
  if (!missing.empty())
    fail(c10::str("[Rank 0]: Ranks ", c10::Join(", ", missing), " failed to pass monitoredBarrier in ",
                  timeout.count(), " ms"));
}

}  // namespace loomtorch
