// Faults never hang: a killed peer, an abort from another thread or a stalled peer turn into errors
// on the surviving ranks, quickly, naming who failed; the process stays usable afterwards.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fork_ranks.h"
#include "seconds_since.h"
#include "loom.h"

namespace {

using Clock = std::chrono::steady_clock;

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// 3 rank processes loop on 64 MiB allreduces; the parent kills rank 2 mid-way. Both survivors must
// return an error naming rank 2 within 15 s and exit normally.
void killOneOfThree(const char* transport) {
  const int n = 3;
  char dir[] = "/tmp/loom-fault-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::vector<pid_t> pids = forkRanks(n, transport, [&](int r, loomComm_t comm) {
    const size_t count = 16u << 20;  // 64 MiB of floats
    std::vector<float> buf(count, 1.0f);
    loomResult_t res = loomSuccess;
    for (int iter = 0; iter < 1000 && res == loomSuccess; ++iter)
      res = loomAllReduce(buf.data(), buf.data(), count, loomFloat32, loomSum, comm, nullptr);
    std::ofstream(std::string(dir) + "/rank" + std::to_string(r)) << res << "\n" << loomGetLastError(comm);
    loomCommAbort(comm);
    _exit(res == loomSuccess ? 11 : 0);
  });
  ASSERT_EQ(pids.size(), static_cast<size_t>(n));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  kill(pids[2], SIGKILL);
  auto killedAt = Clock::now();
  waitpid(pids[2], nullptr, 0);
  for (int r = 0; r < 2; ++r) {
    int status = 0;
    pid_t done = 0;
    while ((done = waitpid(pids[r], &status, WNOHANG)) == 0 && secondsSince(killedAt) < 30)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    double elapsed = secondsSince(killedAt);
    if (done == 0) {
      kill(pids[r], SIGKILL);
      waitpid(pids[r], nullptr, 0);
    }
    ASSERT_NE(done, 0) << "rank " << r << " still hangs 30 s after rank 2 was killed";
    EXPECT_LT(elapsed, 15.0) << "rank " << r;
    ASSERT_TRUE(WIFEXITED(status)) << "rank " << r << " crashed";
    EXPECT_EQ(WEXITSTATUS(status), 0) << "rank " << r;
    std::string report = readFile(std::string(dir) + "/rank" + std::to_string(r));
    EXPECT_NE(report.find("rank 2"), std::string::npos) << "rank " << r << " reported: " << report;
  }
  std::system((std::string("rm -rf ") + dir).c_str());
}

TEST(Faults, KilledPeerDuringAllReduceShm) { killOneOfThree(nullptr); }
TEST(Faults, KilledPeerDuringAllReduceSocket) { killOneOfThree("socket"); }

// A receive from any source on rank 0 of 3 processes that nobody sends to. With `abortOne`, rank 1
// aborts (a failure of its own) while rank 2 stays: rank 0 must fail naming rank 1. Otherwise ranks
// 1 and 2 both close their communicators and exit: rank 0 must fail saying no rank is left. Either
// within 10 s, where the communicator's timeout (none set: 10 minutes) would be far longer.
void anySourceReceiveAfterPeersLeave(const char* transport, bool abortOne) {
  const int n = 3;
  char dir[] = "/tmp/loom-anysrc-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::vector<pid_t> pids = forkRanks(n, transport, [&](int r, loomComm_t comm) {
    if (r == 0) {
      float x = 0;
      int source = -1;
      const auto start = Clock::now();
      const loomResult_t res = loomRecvAny(&x, 1, loomFloat32, &source, comm, nullptr);
      std::ofstream(std::string(dir) + "/rank0") << res << "\n" << secondsSince(start) << "\n" << loomGetLastError(comm);
      loomCommAbort(comm);
      _exit(res == loomSuccess ? 11 : 0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    if (abortOne && r == 1) {
      loomCommAbort(comm);
      _exit(0);
    }
    if (abortOne) std::this_thread::sleep_for(std::chrono::seconds(12));  // rank 2 stays, sending nothing
    loomCommDestroy(comm);
    _exit(0);
  });
  ASSERT_EQ(pids.size(), static_cast<size_t>(n));
  int status = 0;
  pid_t done = 0;
  const auto start = Clock::now();
  while ((done = waitpid(pids[0], &status, WNOHANG)) == 0 && secondsSince(start) < 20)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (pid_t p : pids) kill(p, SIGKILL);
  for (pid_t p : pids) waitpid(p, nullptr, 0);
  const std::string report = readFile(std::string(dir) + "/rank0");
  std::system((std::string("rm -rf ") + dir).c_str());
  ASSERT_NE(done, 0) << "rank 0's receive from any source still waits 20 s after its peers left";
  ASSERT_TRUE(WIFEXITED(status)) << "rank 0 crashed";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "rank 0: " << report;
  std::istringstream lines(report);
  int result = 0;
  double seconds = 0;
  lines >> result >> seconds;
  EXPECT_EQ(result, loomRemoteError) << report;
  EXPECT_LT(seconds, 10.0) << report;
  if (abortOne) {
    EXPECT_NE(report.find("rank 1"), std::string::npos) << report;
  } else {
    EXPECT_NE(report.find("no rank is left"), std::string::npos) << report;
  }
}

TEST(Faults, ReceiveFromAnySourceFailsWhenAPeerAbortsShm) { anySourceReceiveAfterPeersLeave(nullptr, true); }
TEST(Faults, ReceiveFromAnySourceFailsWhenAPeerAbortsSocket) { anySourceReceiveAfterPeersLeave("socket", true); }
TEST(Faults, ReceiveFromAnySourceFailsWhenEveryPeerLeftShm) { anySourceReceiveAfterPeersLeave(nullptr, false); }
TEST(Faults, ReceiveFromAnySourceFailsWhenEveryPeerLeftSocket) { anySourceReceiveAfterPeersLeave("socket", false); }

// Two host ranks as threads of this process, rank 1 never taking part.
struct Pair {
  loomComm_t comms[2] = {nullptr, nullptr};
  explicit Pair(int timeoutMs) {
    loomUniqueId id;
    EXPECT_EQ(loomGetUniqueId(&id), loomSuccess);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r)
      threads.emplace_back([&, r] {
        loomConfig_t config = LOOM_CONFIG_INITIALIZER;
        config.timeoutMs = timeoutMs;
        EXPECT_EQ(loomCommInitRankConfig(&comms[r], 2, id, r, &config), loomSuccess);
      });
    for (auto& t : threads) t.join();
  }
};

TEST(Faults, AbortFromAnotherThreadReleasesAWaiter) {
  Pair pair(0);
  loomResult_t result = loomSuccess;
  double elapsed = 0;
  std::thread waiter([&] {
    std::vector<float> buf(1024, 1.0f);
    result = loomAllReduce(buf.data(), buf.data(), buf.size(), loomFloat32, loomSum, pair.comms[0], nullptr);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto abortedAt = Clock::now();
  EXPECT_EQ(loomCommAbort(pair.comms[0]), loomSuccess);
  waiter.join();
  elapsed = secondsSince(abortedAt);
  EXPECT_NE(result, loomSuccess);
  EXPECT_LT(elapsed, 5.0);
  EXPECT_EQ(loomCommDestroy(pair.comms[1]), loomSuccess);
}

TEST(Faults, StalledPeerTimesOutNamingIt) {
  Pair pair(2000);
  std::vector<float> buf(1024, 1.0f);
  auto start = Clock::now();
  loomResult_t result = loomAllReduce(buf.data(), buf.data(), buf.size(), loomFloat32, loomSum, pair.comms[0], nullptr);
  EXPECT_EQ(result, loomTimeout);
  EXPECT_LT(secondsSince(start), 7.0);
  std::string message = loomGetLastError(pair.comms[0]);
  EXPECT_NE(message.find("rank 1"), std::string::npos) << message;
  loomResult_t async = loomSuccess;
  EXPECT_EQ(loomCommGetAsyncError(pair.comms[0], &async), loomSuccess);
  EXPECT_EQ(async, loomTimeout);
  // After a fatal error the communicator refuses work instead of corrupting it.
  EXPECT_EQ(loomAllReduce(buf.data(), buf.data(), buf.size(), loomFloat32, loomSum, pair.comms[0], nullptr),
            loomInvalidUsage);
  EXPECT_EQ(loomCommAbort(pair.comms[0]), loomSuccess);
  EXPECT_EQ(loomCommAbort(pair.comms[1]), loomSuccess);
  // The usual recovery: a new communicator among the survivors works.
  loomComm_t fresh;
  ASSERT_EQ(loomCommInitAll(&fresh, 1, nullptr), loomSuccess);
  EXPECT_EQ(loomAllReduce(buf.data(), buf.data(), buf.size(), loomFloat32, loomSum, fresh, nullptr), loomSuccess);
  EXPECT_EQ(loomCommDestroy(fresh), loomSuccess);
}

// Out of file descriptors while every rank connects to every network peer at init
// (LOOM_NET_CONNECT=eager): the ranks whose connects or accepts fail tell their peers, so init fails
// on every rank naming the cause instead of leaving the others waiting (no timeout is set). In a child
// process: it lowers its own descriptor limit.
TEST(Faults, RunningOutOfDescriptorsWhileConnectingAtInitFailsEveryRank) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    alarm(60);  // a hang fails the test (SIGALRM) instead of stalling the suite
    const rlimit limit{700, 700};  // enough to listen for every peer, not to connect to all of them
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) _exit(20);
    setenv("LOOM_TRANSPORT", "net", 1);
    setenv("LOOM_NET_CONNECT", "eager", 1);
    unsetenv("LOOM_TIMEOUT_MS");
    constexpr int n = 12;
    std::vector<loomComm_t> comms(n);
    if (loomCommInitAll(comms.data(), n, nullptr) == loomSuccess) _exit(21);
    const std::string message = loomGetLastError(nullptr);
    std::fprintf(stderr, "%s\n", message.c_str());
    _exit(message.find("Too many open files") != std::string::npos ? 0 : 22);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << (WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status)) + " (14: it hung)"
                              : "exit " + std::to_string(WEXITSTATUS(status)) + " (21: init succeeded, 22: another error)");
}

}  // namespace
