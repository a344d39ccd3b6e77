// Runs one test body on N ranks, as threads of this process or as forked processes, over the
// transport chosen by LOOM_TRANSPORT. Bodies report failure by returning a non-empty string (never
// with gtest assertions), so the same body runs in a forked child, where gtest must not be used.
// A run that exceeds its time limit fails instead of hanging: children are killed; threads cannot
// be, so the harness prints what every rank was doing and ends the test binary.
#pragma once

#include "scoped_env.h"

#include <functional>
#include <string>
#include <vector>

#include "loom.h"

namespace loomtest {

enum class Launch {
  Threads,         // loomGetUniqueId once, loomCommInitRank on every thread
  ThreadsInitAll,  // loomCommInitAll(comms, n, NULL) on this thread, one thread per comm
  Processes,       // fork() N children; rank 0 makes the unique id and shares it; loomCommInitRank in each
};
const char* launchName(Launch launch);

struct RankContext {
  loomComm_t comm = nullptr;  // null in runRanksRaw bodies until they make one
  int rank = 0;
  int nranks = 0;
  Launch launch = Launch::Threads;
  std::string transport;  // effective: LOOM_TRANSPORT if set, else "local" (threads) / "shm" (processes)
  loomUniqueId id{};      // the run's unique id

  // Records what this rank is doing now; printed if the run times out.
  void note(const std::string& what) const;
  // "ranks=4 launch=threads transport=local" for failure messages.
  std::string where() const;

  char* noteSlot = nullptr;  // shared with the parent (mmap) or the watchdog
};

using RankBody = std::function<std::string(RankContext&)>;

struct RunOptions {
  std::string transport;  // value for LOOM_TRANSPORT; "" leaves it unset (library default)
  int timeoutSec = 600;
  // Processes only: filled with each child's CPU time (user + system), in seconds.
  std::vector<double>* cpuSeconds = nullptr;
  // Processes only: runs in each child right after fork, before anything else (e.g. moves the rank
  // onto a simulated host, tests/hosts); a non-empty result fails the rank without running the body.
  std::function<std::string(int rank)> placeRank;
};

// Makes a communicator for each rank (per launch), runs body, destroys the communicator. Returns ""
// when every rank returned "", else one line per failing rank.
std::string runRanks(Launch launch, int nranks, const RunOptions& options, const RankBody& body);

// Like runRanks but the body makes (and destroys) its own communicators from ctx.id; launch must be
// Threads or Processes.
std::string runRanksRaw(Launch launch, int nranks, const RunOptions& options, const RankBody& body);

// "loomAllReduce(...) returned loomInvalidArgument (invalid argument): <last error>"
std::string callFailure(const char* call, loomResult_t result, loomComm_t comm);

}  // namespace loomtest

// Inside a body: return a failure message if a Loom call does not succeed.
#define LT_CALL(comm, expr)                                                     \
  do {                                                                          \
    loomResult_t lt_result_ = (expr);                                           \
    if (lt_result_ != loomSuccess) return ::loomtest::callFailure(#expr, lt_result_, (comm)); \
  } while (0)
