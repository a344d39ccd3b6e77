// A rank's progress thread and shared-memory FIFOs on its NUMA node (topology/numa_binding.h), seen
// from outside: the thread's CPU affinity as the kernel reports it, and the memory policy of the FIFO
// pages. This machine may have a single NUMA node; the memory policy still tells bound from unbound,
// the thread's affinity is checked to be the node's CPUs the process may use.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "../api/scoped_env.h"
#include "core/communicator.h"
#include "thread_ranks.h"

namespace loom {
namespace {

using loomtest::ScopedEnv;

loomConfig_t nonblocking() {
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

// The CPUs a thread of this process may run on, as a set.
std::set<int> affinityOf(pid_t tid) {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::set<int> cpus;
  if (sched_getaffinity(tid, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.insert(c);
  return cpus;
}

// "0-2,5" -> {0, 1, 2, 5}
std::set<int> parseList(const std::string& list) {
  std::set<int> cpus;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    const size_t dash = item.find('-');
    const int lo = std::stoi(item.substr(0, dash)), hi = dash == std::string::npos ? lo : std::stoi(item.substr(dash + 1));
    for (int c = lo; c <= hi; ++c) cpus.insert(c);
  }
  return cpus;
}

// The threads of this process named loom-progress.
std::vector<pid_t> progressThreads() {
  std::vector<pid_t> tids;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(entry.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (name == "loom-progress") tids.push_back(std::stoi(entry.path().filename()));
  }
  return tids;
}

// The NUMA policy of the page holding p: its mode (0 is the default: first touch) and nodes.
int memoryPolicyOf(const void* p, unsigned long* nodes) {
  int mode = -1;
  *nodes = 0;
  constexpr unsigned long kMpolFAddr = 2;  // MPOL_F_ADDR
  if (syscall(SYS_get_mempolicy, &mode, nodes, 8 * sizeof *nodes, p, kMpolFAddr) != 0) return -1;
  return mode;
}

TEST(Placement, ALiveRankBindsItsProgressThreadAndFifosToItsNode) {
  ScopedEnv file("LOOM_TOPO_FILE", nullptr);
  ScopedEnv cache("LOOM_CACHE_DIR", "none");
  ScopedEnv ignore("LOOM_IGNORE_CPU_AFFINITY", nullptr);
  ScopedEnv transport("LOOM_TRANSPORT", "shm");  // FIFOs in shared memory even between threads
  runThreadRanks(2, nonblocking(), [&](int rank, loomComm_t comm) {
    const NumaBinding& b = comm->numaBinding;
    ASSERT_TRUE(b.active()) << "rank " << rank << ": " << b.reason();
    EXPECT_EQ(b.node(), comm->job->placements[static_cast<size_t>(rank)].numa);
    unsigned long nodes = 0;
    const int mode = memoryPolicyOf(comm->transports->bell(), &nodes);
    EXPECT_NE(mode, 0) << "the FIFO segment has the default policy: not placed";
    EXPECT_TRUE(nodes & (1ul << b.node())) << "policy nodes " << nodes << ", rank's node " << b.node();
    EXPECT_FALSE(parseList(b.cpus()).empty());
  });
}

TEST(Placement, EachProgressThreadRunsOnItsNodesCpus) {
  ScopedEnv file("LOOM_TOPO_FILE", nullptr);
  ScopedEnv cache("LOOM_CACHE_DIR", "none");
  ScopedEnv ignore("LOOM_IGNORE_CPU_AFFINITY", nullptr);
  std::mutex mutex;
  std::set<std::string> expected;
  std::vector<std::set<int>> seen;
  std::atomic<int> ready{0};
  std::atomic<bool> scanned{false};
  runThreadRanks(2, nonblocking(), [&](int, loomComm_t comm) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      expected.insert(comm->numaBinding.cpus());
    }
    // A progress thread binds itself first thing when it starts, which may be after init returns.
    if (++ready == 2) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (progressThreads().size() < 2 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::lock_guard<std::mutex> lock(mutex);
      for (pid_t tid : progressThreads()) seen.push_back(affinityOf(tid));
      scanned = true;
    }
    while (!scanned.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // keep both comms up
  });
  ASSERT_EQ(seen.size(), 2u) << "two loom-progress threads";
  ASSERT_EQ(expected.size(), 1u);  // one node here, or both ranks on the same one
  for (const std::set<int>& cpus : seen) EXPECT_EQ(cpus, parseList(*expected.begin()));
}

TEST(Placement, IgnoreCpuAffinityLeavesThreadsAndMemoryAlone) {
  ScopedEnv file("LOOM_TOPO_FILE", nullptr);
  ScopedEnv cache("LOOM_CACHE_DIR", "none");
  ScopedEnv ignore("LOOM_IGNORE_CPU_AFFINITY", "1");
  ScopedEnv transport("LOOM_TRANSPORT", "shm");
  runThreadRanks(2, nonblocking(), [&](int, loomComm_t comm) {
    EXPECT_FALSE(comm->numaBinding.active());
    EXPECT_EQ(comm->numaBinding.reason(), "LOOM_IGNORE_CPU_AFFINITY=1");
    unsigned long nodes = 0;
    EXPECT_EQ(memoryPolicyOf(comm->transports->bell(), &nodes), 0) << "the FIFO memory was placed anyway";
  });
}

// A topology file describes another machine (or one the ranks stand for): nothing is bound by it.
TEST(Placement, ATopologyFileBindsNothing) {
  const std::string fixture =
      std::string(std::getenv("LOOM_FIXTURES") ? std::getenv("LOOM_FIXTURES") : "../shared/fixtures/topology") +
      "/nccl-hgx-8xA100-nvswitch-4xcx6.xml";
  if (!std::filesystem::exists(fixture)) GTEST_SKIP() << fixture << " is absent (set LOOM_FIXTURES)";
  ScopedEnv file("LOOM_TOPO_FILE", fixture.c_str());
  ScopedEnv ignore("LOOM_IGNORE_CPU_AFFINITY", nullptr);
  runThreadRanks(2, nonblocking(), [&](int, loomComm_t comm) {
    EXPECT_FALSE(comm->numaBinding.active());
    EXPECT_NE(comm->numaBinding.reason().find("file"), std::string::npos) << comm->numaBinding.reason();
  });
}

}  // namespace
}  // namespace loom
