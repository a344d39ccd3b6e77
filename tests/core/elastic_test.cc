// Going on without lost ranks (loom.h: loomCommRevoke, loomCommShrink, loomCommGrow): rank processes
// killed with SIGKILL mid-step, the survivors shrinking and growing back, cycle after cycle; ranks as
// threads that fail, are excluded or revoke; bad arguments. Every communicator made is checked with an
// allreduce, element by element.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fork_ranks.h"
#include "seconds_since.h"
#include "thread_ranks.h"
#include "loom.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kCount = 1003;  // elements: not a multiple of anything the library cuts by

// An allreduce over comm whose every element is checked; "" when right, else what was wrong.
std::string checkedAllReduce(loomComm_t comm) {
  int rank = -1, n = 0;
  loomCommUserRank(comm, &rank);
  loomCommCount(comm, &n);
  std::vector<float> data(kCount);
  for (size_t i = 0; i < kCount; ++i) data[i] = static_cast<float>((rank + 1) * (i % 5 + 1));
  if (loomAllReduce(data.data(), data.data(), kCount, loomFloat32, loomSum, comm, nullptr) != loomSuccess)
    return std::string("allreduce failed: ") + loomGetLastError(comm);
  for (size_t i = 0; i < kCount; ++i) {
    const float want = static_cast<float>(n * (n + 1) / 2 * (i % 5 + 1));
    if (data[i] != want)
      return "element " + std::to_string(i) + " is " + std::to_string(data[i]) + ", expected " + std::to_string(want);
  }
  return "";
}

// ---- Rank processes: kill, shrink, grow back, repeat --------------------------------------------

struct Cycles {
  std::string dir;  // where ranks leave their ids for the test to hand to a replacement, and reports
  int nranks = 4;
  int cycles = 1;
};

void reportToTest(const Cycles& c, const std::string& what) {
  std::ofstream(c.dir + "/report-" + std::to_string(getpid()), std::ios::app) << what << "\n";
}

// Writes `id` where the test process finds it whole (a rename is atomic).
void leaveId(const Cycles& c, int cycle, const loomUniqueId& id) {
  const std::string path = c.dir + "/grow-" + std::to_string(cycle);
  std::ofstream(path + ".tmp", std::ios::binary).write(reinterpret_cast<const char*>(&id), sizeof id);
  std::rename((path + ".tmp").c_str(), path.c_str());
}

// One rank's life from cycle `first` on, in comm (of c.nranks ranks). In each cycle the ranks run
// allreduces; rank cycle % n kills itself with SIGKILL in the third; the others get an error naming
// it, shrink without it (revoking what was in flight), check the smaller communicator, and grow back
// to n with a replacement the test process starts. Exits 0 after the last cycle, else with a report.
[[noreturn]] void rankLife(const Cycles& c, loomComm_t comm, int first) {
  const int n = c.nranks;
  for (int cycle = first; cycle < c.cycles; ++cycle) {
    int rank = -1;
    loomCommUserRank(comm, &rank);
    const int victim = cycle % n;
    loomResult_t res = loomSuccess;
    int steps = 0;
    const Clock::time_point start = Clock::now();
    for (; steps < 10000 && res == loomSuccess; ++steps) {
      if (steps == 2 && rank == victim) kill(getpid(), SIGKILL);
      std::vector<float> data(kCount, 1.0f);
      res = loomAllReduce(data.data(), data.data(), kCount, loomFloat32, loomSum, comm, nullptr);
    }
    const std::string error = loomGetLastError(comm);
    if (res == loomSuccess || error.find("rank " + std::to_string(victim)) == std::string::npos) {
      reportToTest(c, "cycle " + std::to_string(cycle) + ": rank " + std::to_string(rank) + " saw no error naming rank " +
                    std::to_string(victim) + " after " + std::to_string(steps) + " steps: " + error);
      _exit(20);
    }
    const double detected = secondsSince(start);
    int excluded[] = {victim};
    loomComm_t smaller = nullptr;
    if (loomCommShrink(comm, excluded, 1, &smaller, nullptr, LOOM_SHRINK_ABORT) != loomSuccess) {
      reportToTest(c, "cycle " + std::to_string(cycle) + ": shrink failed: " + loomGetLastError(comm));
      _exit(21);
    }
    int smallRank = -1, smallCount = 0;
    loomCommUserRank(smaller, &smallRank);
    loomCommCount(smaller, &smallCount);
    if (smallCount != n - 1 || smallRank != (rank < victim ? rank : rank - 1)) {
      reportToTest(c, "cycle " + std::to_string(cycle) + ": shrunk to rank " + std::to_string(smallRank) + " of " +
                    std::to_string(smallCount));
      _exit(22);
    }
    if (const std::string wrong = checkedAllReduce(smaller); !wrong.empty()) {
      reportToTest(c, "cycle " + std::to_string(cycle) + ": after shrinking: " + wrong);
      _exit(23);
    }
    if (smallRank == 0) {
      loomUniqueId id;
      if (loomCommGetUniqueId(smaller, &id) != loomSuccess) {
        reportToTest(c, std::string("loomCommGetUniqueId: ") + loomGetLastError(smaller));
        _exit(24);
      }
      leaveId(c, cycle, id);
    }
    loomComm_t grown = nullptr;
    if (loomCommGrow(smaller, n, nullptr, -1, &grown, nullptr) != loomSuccess) {
      reportToTest(c, "cycle " + std::to_string(cycle) + ": grow failed: " + loomGetLastError(smaller));
      _exit(25);
    }
    if (const std::string wrong = checkedAllReduce(grown); !wrong.empty()) {
      reportToTest(c, "cycle " + std::to_string(cycle) + ": after growing: " + wrong);
      _exit(26);
    }
    loomCommDestroy(smaller);
    loomCommDestroy(comm);
    comm = grown;
    reportToTest(c, "cycle " + std::to_string(cycle) + ": error after " + std::to_string(detected) + " s");
  }
  loomCommDestroy(comm);
  _exit(0);
}

// The replacement for cycle `cycle`'s victim: joins the grown communicator as its last rank.
[[noreturn]] void replacementLife(const Cycles& c, int cycle) {
  loomUniqueId id;
  std::ifstream(c.dir + "/grow-" + std::to_string(cycle), std::ios::binary).read(reinterpret_cast<char*>(&id), sizeof id);
  loomComm_t comm = nullptr;
  if (loomCommGrow(nullptr, c.nranks, &id, c.nranks - 1, &comm, nullptr) != loomSuccess) {
    reportToTest(c, std::string("replacement for cycle ") + std::to_string(cycle) + ": grow failed: " + loomGetLastError(nullptr));
    _exit(30);
  }
  if (const std::string wrong = checkedAllReduce(comm); !wrong.empty()) {
    reportToTest(c, "replacement after growing: " + wrong);
    _exit(31);
  }
  rankLife(c, comm, cycle + 1);
}

std::string readAll(const std::string& dir) {
  std::string out;
  const std::string list = dir + "/reports";
  std::system(("cat " + dir + "/report-* > " + list + " 2>/dev/null").c_str());
  std::ifstream in(list);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// `cycles` kill-shrink-grow cycles of `n` rank processes; each cycle must end within `cycleLimitS`.
void killShrinkGrow(int n, int cycles, double cycleLimitS, const char* transport = nullptr) {
  char dir[] = "/tmp/loom-elastic-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  Cycles c{dir, n, cycles};
  setenv("LOOM_TIMEOUT_MS", "20000", 1);  // a dead peer must be found by its death, not by this
  if (transport) setenv("LOOM_TRANSPORT", transport, 1);
  std::vector<pid_t> live = forkRanks(n, transport, [&](int, loomComm_t comm) { rankLife(c, comm, 0); });
  if (transport) setenv("LOOM_TRANSPORT", transport, 1);  // forkRanks unset it: the replacements need it too
  ASSERT_EQ(live.size(), static_cast<size_t>(n));
  bool hung = false;
  for (int cycle = 0; cycle < cycles && !hung; ++cycle) {
    const Clock::time_point start = Clock::now();
    // The victim's death, then the id for its replacement.
    pid_t dead = 0;
    int status = 0;
    while ((dead = waitpid(-1, &status, WNOHANG)) == 0 && secondsSince(start) < cycleLimitS)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (dead <= 0 || !WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
      ADD_FAILURE() << "cycle " << cycle << ": no victim died by SIGKILL (pid " << dead << ", status " << status
                    << "); reports:\n" << readAll(dir);
      hung = true;
      break;
    }
    std::erase(live, dead);
    const std::string idFile = std::string(dir) + "/grow-" + std::to_string(cycle);
    struct stat st;
    while (stat(idFile.c_str(), &st) != 0 && secondsSince(start) < cycleLimitS)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (stat(idFile.c_str(), &st) != 0) {
      ADD_FAILURE() << "cycle " << cycle << ": the survivors did not shrink within " << cycleLimitS << " s; reports:\n"
                    << readAll(dir);
      hung = true;
      break;
    }
    const pid_t replacement = fork();
    if (replacement == 0) replacementLife(c, cycle);
    live.push_back(replacement);
  }
  unsetenv("LOOM_TIMEOUT_MS");
  unsetenv("LOOM_TRANSPORT");
  const Clock::time_point end = Clock::now();
  for (pid_t p : live) {
    int status = 0;
    pid_t done = 0;
    while (!hung && (done = waitpid(p, &status, WNOHANG)) == 0 && secondsSince(end) < cycleLimitS)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (done != p) {
      kill(p, SIGKILL);
      waitpid(p, nullptr, 0);
      if (!hung) ADD_FAILURE() << "pid " << p << " still runs after the last cycle; reports:\n" << readAll(dir);
      continue;
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "pid " << p << " ended with status " << status << "; reports:\n" << readAll(dir);
  }
  // What the ranks saw, one line per rank and cycle: how long after the kill its error came.
  const std::string seen = readAll(dir);
  std::printf("%d cycles of %d ranks: %zu cycle reports\n%s", cycles, n, std::count(seen.begin(), seen.end(), '\n'),
              seen.c_str());
  EXPECT_EQ(static_cast<int>(std::count(seen.begin(), seen.end(), '\n')), cycles * (n - 1)) << seen;
  std::system((std::string("rm -rf ") + dir).c_str());
}

int cyclesWanted(int otherwise) {
  const char* v = std::getenv("LOOM_ELASTIC_CYCLES");
  return v ? std::atoi(v) : otherwise;
}

TEST(ElasticProcesses, KillShrinkGrowFourRanks) { killShrinkGrow(4, cyclesWanted(20), 30.0); }
TEST(ElasticProcesses, KillShrinkGrowEightRanks) { killShrinkGrow(8, cyclesWanted(8), 30.0); }
TEST(ElasticProcesses, KillShrinkGrowOverSockets) { killShrinkGrow(4, cyclesWanted(4), 30.0, "socket"); }

// Shrink called while a peer dies: of 4 rank processes rank 3 is killed, the other three shrink without
// it and rank 2 is killed on its way into that shrink (before it, at once, or a moment in). Ranks 0
// and 1 must get an error, not a hang, within the shrink's timeout, then shrink again without both
// and go on, checked element by element.
TEST(ElasticProcesses, ShrinkWhileAPeerDies) {
  constexpr int kShrinkTimeoutMs = 3000;
  for (int delayMs : {-1, 0, 5, 50}) {  // -1: rank 2 dies just before it calls loomCommShrink
    SCOPED_TRACE(delayMs);
    setenv("LOOM_TIMEOUT_MS", "20000", 1);
    const std::vector<pid_t> pids = forkRanks(4, nullptr, [&](int rank, loomComm_t comm) {
      if (!checkedAllReduce(comm).empty()) _exit(30);
      if (rank == 3) raise(SIGKILL);
      std::vector<float> data(kCount, 1.0f);
      if (loomAllReduce(data.data(), data.data(), kCount, loomFloat32, loomSum, comm, nullptr) == loomSuccess) _exit(31);
      if (rank == 2) {
        if (delayMs < 0) raise(SIGKILL);
        std::thread([delayMs] {
          std::this_thread::sleep_for(std::chrono::milliseconds(delayMs));
          raise(SIGKILL);
        }).detach();
      }
      loomConfig_t config = LOOM_CONFIG_INITIALIZER;
      config.timeoutMs = kShrinkTimeoutMs;
      int lost[] = {3};
      loomComm_t smaller = nullptr;
      const Clock::time_point start = Clock::now();
      const loomResult_t first = loomCommShrink(comm, lost, 1, &smaller, &config, LOOM_SHRINK_ABORT);
      if (rank == 2) for (;;) pause();  // dies in there, or here
      // The first shrink may succeed when rank 2 died after the child was made; its first allreduce
      // then fails naming rank 2.
      if (first == loomSuccess) {
        if (checkedAllReduce(smaller).empty()) _exit(32);
        loomCommAbort(smaller);
      }
      if (secondsSince(start) > kShrinkTimeoutMs / 1000.0 + 5.0) _exit(33);
      int bothLost[] = {2, 3};
      if (loomCommShrink(comm, bothLost, 2, &smaller, &config, LOOM_SHRINK_ABORT) != loomSuccess) {
        std::fprintf(stderr, "rank %d: second shrink: %s\n", rank, loomGetLastError(comm));
        _exit(34);
      }
      const std::string check = checkedAllReduce(smaller);
      if (!check.empty()) {
        std::fprintf(stderr, "rank %d: after the second shrink: %s\n", rank, check.c_str());
        _exit(35);
      }
      loomCommDestroy(smaller);
      loomCommAbort(comm);
      _exit(0);
    });
    unsetenv("LOOM_TIMEOUT_MS");
    for (int r = 0; r < 4; ++r) {
      int status = 0;
      waitpid(pids[static_cast<size_t>(r)], &status, 0);
      if (r >= 2) EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "rank " << r << ": " << status;
      else EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
          << "rank " << r << ": " << (WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status));
    }
  }
}

// ---- Rank threads ---------------------------------------------------------------------------------

// n thread ranks of one communicator (a 20 s timeout) each run body(rank, comm); body owns comm.
void threadRanks(int n, const std::function<void(int, loomComm_t)>& body) {
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.timeoutMs = 20000;
  runThreadRanks(n, config, body, CommOwner::Body);
}

// Ranks 2 and 5 of 8 fail (abort) while the others wait on them in an allreduce; the others get an
// error naming one, and shrink without them, with and without revoking first.
TEST(ElasticThreads, ShrinkAfterRanksFail) {
  for (int flags : {LOOM_SHRINK_ABORT, LOOM_SHRINK_DEFAULT}) {
    SCOPED_TRACE(flags);
    threadRanks(8, [&](int r, loomComm_t comm) {
      if (r == 2 || r == 5) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        EXPECT_EQ(loomCommAbort(comm), loomSuccess);
        return;
      }
      std::vector<float> data(kCount, 1.0f);
      const Clock::time_point start = Clock::now();
      EXPECT_NE(loomAllReduce(data.data(), data.data(), kCount, loomFloat32, loomSum, comm, nullptr), loomSuccess);
      EXPECT_LT(secondsSince(start), 10.0);
      const std::string error = loomGetLastError(comm);
      EXPECT_TRUE(error.find("rank 2") != std::string::npos || error.find("rank 5") != std::string::npos) << error;
      int excluded[] = {5, 2};
      loomComm_t smaller = nullptr;
      ASSERT_EQ(loomCommShrink(comm, excluded, 2, &smaller, nullptr, flags), loomSuccess) << loomGetLastError(comm);
      int rank = -1, count = 0;
      loomCommUserRank(smaller, &rank);
      loomCommCount(smaller, &count);
      EXPECT_EQ(count, 6);
      EXPECT_EQ(rank, r - (r > 2) - (r > 5));
      EXPECT_EQ(checkedAllReduce(smaller), "");
      EXPECT_EQ(loomCommDestroy(smaller), loomSuccess);
      EXPECT_EQ(loomCommDestroy(comm), loomSuccess);
    });
  }
}

// Live ranks may be excluded too: ranks 0 and 3 of 4 leave (they destroy their communicator), the
// others shrink to two and go on; the parent stays usable for nothing else.
TEST(ElasticThreads, ShrinkExcludingLiveRanks) {
  threadRanks(4, [&](int r, loomComm_t comm) {
    if (r == 0 || r == 3) {
      EXPECT_EQ(loomCommDestroy(comm), loomSuccess);
      return;
    }
    int excluded[] = {0, 3};
    loomComm_t smaller = nullptr;
    ASSERT_EQ(loomCommShrink(comm, excluded, 2, &smaller, nullptr, LOOM_SHRINK_DEFAULT), loomSuccess)
        << loomGetLastError(comm);
    int rank = -1;
    loomCommUserRank(smaller, &rank);
    EXPECT_EQ(rank, r - 1);
    EXPECT_EQ(checkedAllReduce(smaller), "");
    EXPECT_EQ(loomCommDestroy(smaller), loomSuccess);
    EXPECT_EQ(loomCommDestroy(comm), loomSuccess);
  });
}

// A rank that revokes: its peers waiting on it in an allreduce fail at once (far within the 20 s
// timeout), its own later calls are refused saying so; then all three shrink, excluding nobody.
TEST(ElasticThreads, RevokeFailsPeersAtOnce) {
  threadRanks(3, [&](int r, loomComm_t comm) {
    std::vector<float> data(kCount, 1.0f);
    if (r == 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      EXPECT_EQ(loomCommRevoke(comm, LOOM_REVOKE_DEFAULT), loomSuccess);
      EXPECT_NE(loomAllReduce(data.data(), data.data(), kCount, loomFloat32, loomSum, comm, nullptr), loomSuccess);
      EXPECT_NE(std::string(loomGetLastError(comm)).find("revoked"), std::string::npos) << loomGetLastError(comm);
    } else {
      const Clock::time_point start = Clock::now();
      EXPECT_NE(loomAllReduce(data.data(), data.data(), kCount, loomFloat32, loomSum, comm, nullptr), loomSuccess);
      EXPECT_LT(secondsSince(start), 5.0);
      EXPECT_NE(std::string(loomGetLastError(comm)).find("revoked"), std::string::npos) << loomGetLastError(comm);
    }
    loomComm_t fresh = nullptr;
    ASSERT_EQ(loomCommShrink(comm, nullptr, 0, &fresh, nullptr, LOOM_SHRINK_DEFAULT), loomSuccess)
        << loomGetLastError(comm);
    EXPECT_EQ(checkedAllReduce(fresh), "");
    EXPECT_EQ(loomCommDestroy(fresh), loomSuccess);
    EXPECT_EQ(loomCommDestroy(comm), loomSuccess);
  });
}

// Two thread ranks grow to four: two more threads join with the id one rank handed out.
TEST(ElasticThreads, GrowKeepsNumbersAndAppends) {
  loomUniqueId growId;
  std::atomic<bool> idReady{false};
  std::vector<std::thread> joiners;
  for (int r = 2; r < 4; ++r)
    joiners.emplace_back([&, r] {
      while (!idReady.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      loomComm_t comm = nullptr;
      ASSERT_EQ(loomCommGrow(nullptr, 4, &growId, r, &comm, nullptr), loomSuccess) << loomGetLastError(nullptr);
      EXPECT_EQ(checkedAllReduce(comm), "");
      EXPECT_EQ(loomCommDestroy(comm), loomSuccess);
    });
  threadRanks(2, [&](int r, loomComm_t comm) {
    if (r == 1) {
      ASSERT_EQ(loomCommGetUniqueId(comm, &growId), loomSuccess);
      idReady.store(true);
    }
    loomComm_t grown = nullptr;
    ASSERT_EQ(loomCommGrow(comm, 4, nullptr, -1, &grown, nullptr), loomSuccess) << loomGetLastError(comm);
    int rank = -1, count = 0;
    loomCommUserRank(grown, &rank);
    loomCommCount(grown, &count);
    EXPECT_EQ(rank, r);
    EXPECT_EQ(count, 4);
    EXPECT_EQ(checkedAllReduce(grown), "");
    EXPECT_EQ(loomCommDestroy(grown), loomSuccess);
    EXPECT_EQ(loomCommDestroy(comm), loomSuccess);
  });
  for (auto& t : joiners) t.join();
}

TEST(ElasticThreads, BadArgumentsAreRefusedNamingThem) {
  threadRanks(2, [&](int r, loomComm_t comm) {
    loomComm_t out = nullptr;
    int self[] = {r}, outside[] = {2}, twice[] = {1 - r, 1 - r};
    EXPECT_EQ(loomCommShrink(comm, self, 1, &out, nullptr, 0), loomInvalidArgument);
    EXPECT_NE(std::string(loomGetLastError(comm)).find("excludes itself"), std::string::npos);
    EXPECT_EQ(loomCommShrink(comm, outside, 1, &out, nullptr, 0), loomInvalidArgument);
    EXPECT_EQ(loomCommShrink(comm, twice, 2, &out, nullptr, 0), loomInvalidArgument);
    EXPECT_EQ(loomCommShrink(comm, nullptr, 1, &out, nullptr, 0), loomInvalidArgument);
    EXPECT_EQ(loomCommShrink(comm, nullptr, 0, &out, nullptr, 0x4), loomInvalidArgument);
    EXPECT_EQ(loomCommShrink(comm, nullptr, 0, nullptr, nullptr, 0), loomInvalidArgument);
    EXPECT_EQ(loomCommRevoke(comm, 1), loomInvalidArgument);
    EXPECT_EQ(loomCommGrow(comm, 2, nullptr, -1, &out, nullptr), loomInvalidArgument);  // not larger
    EXPECT_EQ(loomCommGrow(comm, 3, nullptr, 1 - r, &out, nullptr), loomInvalidArgument);  // not its number
    EXPECT_EQ(loomCommGrow(nullptr, 3, nullptr, 2, &out, nullptr), loomInvalidArgument);  // a joiner without id
    // Nobody called loomCommGetUniqueId: both ranks are told, none waits.
    EXPECT_EQ(loomCommGrow(comm, 3, nullptr, -1, &out, nullptr), loomInvalidUsage);
    EXPECT_NE(std::string(loomGetLastError(comm)).find("loomCommGetUniqueId"), std::string::npos);
    EXPECT_EQ(out, nullptr);
    EXPECT_EQ(checkedAllReduce(comm), "");  // still usable
    EXPECT_EQ(loomCommDestroy(comm), loomSuccess);
  });
}

}  // namespace
