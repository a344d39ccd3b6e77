#include "rank_process.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <thread>
#include <vector>

#include "benchmark.h"
#include "loom_error.h"

namespace loomperf {
namespace {

[[noreturn]] void die(int rank, const char* what, int code) {
  std::fprintf(stderr, "loom-perf: rank %d: %s\n", rank, what);
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);
}

// Bounds the whole process even when a peer hangs without the library noticing.
void startWatchdog(int seconds) {
  std::thread([seconds] {
    std::this_thread::sleep_for(std::chrono::seconds(seconds));
    std::fprintf(stderr, "loom-perf: timed out after %d s (-T)\n", seconds);
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(kExitTimeout);
  }).detach();
}

loomComm_t initComm(const Options& o, int nranks, const loomUniqueId& id, int rank) {
  loomComm_t comm = nullptr;
  if (o.timeoutSec > 0) {
    loomConfig_t config = LOOM_CONFIG_INITIALIZER;
    config.commName = "loom-perf";
    config.timeoutMs = o.timeoutSec * 1000;
    check(loomCommInitRankConfig(&comm, nranks, id, rank, &config), "loomCommInitRankConfig", nullptr);
  } else {
    check(loomCommInitRank(&comm, nranks, id, rank), "loomCommInitRank", nullptr);
  }
  int count = 0, self = -1;
  check(loomCommCount(comm, &count), "loomCommCount", comm);
  check(loomCommUserRank(comm, &self), "loomCommUserRank", comm);
  if (count != nranks || self != rank) {
    char msg[128];
    std::snprintf(msg, sizeof msg, "communicator reports rank %d of %d, expected %d of %d", self, count, rank,
                  nranks);
    die(rank, msg, kExitError);
  }
  return comm;
}

int rankMain(const Options& o, int rank, int nranks, const loomUniqueId& id,
             const std::function<void()>& afterInit) {
  try {
    loomComm_t comm = initComm(o, nranks, id, rank);
    if (afterInit) afterInit();
    const int64_t wrong = runBenchmark(o, comm, rank, nranks);
    check(loomCommDestroy(comm), "loomCommDestroy", nullptr);
    return wrong > 0 ? kExitWrong : kExitOk;
  } catch (const std::exception& e) {
    die(rank, e.what(), kExitError);
  }
}

}  // namespace

int runRankProcess(const Options& o, int procRank, int nprocs, const loomUniqueId& id,
                   const std::function<void()>& afterInit) {
  if (o.timeoutSec > 0) startWatchdog(o.timeoutSec);
  const int nranks = nprocs * o.nthreads;
  const int firstRank = procRank * o.nthreads;
  if (o.nthreads == 1) return rankMain(o, firstRank, nranks, id, afterInit);

  std::vector<int> codes(o.nthreads, kExitOk);
  std::vector<std::thread> threads;
  for (int t = 0; t < o.nthreads; ++t) {
    threads.emplace_back([&, t] {
      codes[t] = rankMain(o, firstRank + t, nranks, id, t == 0 ? afterInit : std::function<void()>{});
    });
  }
  for (auto& th : threads) th.join();
  return *std::max_element(codes.begin(), codes.end());
}

}  // namespace loomperf
