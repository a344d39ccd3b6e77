// Who is stuck in a running job, asked from outside it: rank processes wedged by planted faults (a
// rank that skips a collective, one stuck in compute, one that calls another collective, one that was
// killed), and loom-doctor, run as a user runs it, must name the right rank and operation in its text
// and JSON, also of thread ranks that share a process. The same report is logged by the lowest-numbered
// rank whose operation timed out, and by a process sent SIGUSR1. Without LOOM_DOCTOR the tool finds
// nothing to ask.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
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

#include <nlohmann/json.hpp>

#include "fork_ranks.h"
#include "loom.h"

namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs loom-doctor with `args`; its stdout, and its exit status in *status.
std::string doctor(const std::string& args, int* status = nullptr) {
  const char* exe = std::getenv("LOOM_DOCTOR_EXE");
  std::string out;
  FILE* p = popen((std::string(exe ? exe : "loom-doctor") + " " + args + " 2>&1").c_str(), "r");
  if (!p) return "popen failed";
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = pclose(p);
  if (status) *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

void sleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// A job of `n` ranks, each a process of its own or all threads of one process; the stderr of a rank's
// process is in <dir>/rank<r>.err (threads: rank0.err). Every rank makes `warmup` good allreduces, says
// so, then runs its planted `body` (which wedges or fails it, never returns).
class Job {
 public:
  using Body = std::function<void(int rank, loomComm_t comm)>;
  enum class Ranks { Processes, Threads };
  Job(int n, int warmup, const Body& body, const char* timeoutMs = "60000", Ranks ranks = Ranks::Processes)
      : n_(n), threads_(ranks == Ranks::Threads) {
    char tmpl[] = "/tmp/loom-doctor-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    setenv("LOOM_DOCTOR_DIR", (dir_ + "/sockets").c_str(), 1);
    setenv("LOOM_TIMEOUT_MS", timeoutMs, 1);
    int ready[2];
    EXPECT_EQ(pipe(ready), 0);
    auto logTo = [&](int rank) {
      FILE* f = std::freopen(errPath(rank).c_str(), "w", stderr);
      if (!f) _exit(20);
      std::setvbuf(stderr, nullptr, _IONBF, 0);
    };
    auto runRank = [&](int rank, loomComm_t comm) {
      std::vector<float> data(1000, 1.0f);
      for (int i = 0; i < warmup; ++i)
        if (loomAllReduce(data.data(), data.data(), data.size(), loomFloat32, loomSum, comm, nullptr) != loomSuccess)
          _exit(21);
      const char byte = 1;
      if (write(ready[1], &byte, 1) != 1) _exit(22);
      body(rank, comm);
      for (;;) pause();  // keeps its state for the doctor until the test kills it
    };
    if (threads_) {
      const pid_t pid = fork();
      if (pid == 0) {
        close(ready[0]);
        logTo(0);
        loomUniqueId id;
        if (loomGetUniqueId(&id) != loomSuccess) _exit(23);
        std::vector<std::thread> ranks;
        for (int r = 0; r < n; ++r)
          ranks.emplace_back([&, r] {
            loomComm_t comm = nullptr;
            if (loomCommInitRank(&comm, n, id, r) != loomSuccess) _exit(10);
            runRank(r, comm);
          });
        for (;;) pause();
      }
      pids_.push_back(pid);
    } else {
      pids_ = forkRanks(n, nullptr, [&](int rank, loomComm_t comm) {
        close(ready[0]);
        logTo(rank);
        runRank(rank, comm);
      });
    }
    close(ready[1]);
    int joined = 0;
    pollfd fd{ready[0], POLLIN, 0};
    char byte;
    while (joined < n && poll(&fd, 1, 60000) == 1 && read(ready[0], &byte, 1) == 1) ++joined;
    close(ready[0]);
    EXPECT_EQ(joined, n) << "a rank died before its planted fault";
    unsetenv("LOOM_DOCTOR_DIR");
    unsetenv("LOOM_TIMEOUT_MS");
  }
  ~Job() {
    for (pid_t p : pids_) kill(p, SIGKILL);
    for (pid_t p : pids_) waitpid(p, nullptr, 0);
    std::system(("rm -rf '" + dir_ + "'").c_str());
  }
  std::string sockets() const { return dir_ + "/sockets"; }
  // Waits (up to 30 s) until each rank r with want[r] > 0 has issued operation want[r], as the
  // processes' own lists say (a loaded machine may not have run a rank into its planted state yet),
  // then 300 ms more: a wait's peer is noted once it lasted 100 ms.
  bool waitUntilIssued(const std::vector<uint64_t>& want) const {
    for (int attempt = 0; attempt < 300; ++attempt, sleepMs(100)) {
      const nlohmann::json list = nlohmann::json::parse(doctor("--list --json --dir " + sockets()), nullptr, false);
      if (list.is_discarded()) continue;
      std::vector<uint64_t> issued(want.size(), 0);
      for (const auto& p : list)
        for (const auto& c : p["comms"])
          if (c["rank"].get<size_t>() < issued.size()) issued[c["rank"].get<size_t>()] = c["last_issued"].get<uint64_t>();
      bool all = true;
      for (size_t r = 0; r < want.size(); ++r) all = all && (want[r] == 0 || issued[r] >= want[r]);
      if (all) {
        sleepMs(300);
        return true;
      }
    }
    return false;
  }
  // The rank's stderr once it holds `text`, or after 10 s.
  std::string stderrOnceItSays(int rank, const char* text) const {
    std::string log;
    for (int i = 0; i < 100 && log.find(text) == std::string::npos; ++i) {
      sleepMs(100);
      log = readFile(errPath(rank));
    }
    return log;
  }
  pid_t pid(int rank) const { return pids_[threads_ ? 0 : static_cast<size_t>(rank)]; }

  // The doctor's text and JSON report of the job (the one job here).
  std::string text() const { return doctor("--dir " + sockets()); }
  nlohmann::json json() const {
    const std::string out = doctor("--json --dir " + sockets());
    try {
      const nlohmann::json all = nlohmann::json::parse(out);
      EXPECT_EQ(all.size(), 1u) << out;
      return all.empty() ? nlohmann::json::object() : all[0];
    } catch (const std::exception& e) {
      ADD_FAILURE() << "loom-doctor --json printed no JSON (" << e.what() << "): " << out;
      return nlohmann::json::object();
    }
  }

 private:
  std::string errPath(int rank) const { return dir_ + "/rank" + std::to_string(threads_ ? 0 : rank) + ".err"; }

  int n_;
  bool threads_;
  std::string dir_;
  std::vector<pid_t> pids_;
};

std::vector<int> intsOrNone(const nlohmann::json& j) { return j.is_array() ? j.get<std::vector<int>>() : std::vector<int>{}; }

void allReduce(loomComm_t comm, size_t count = 1000) {
  std::vector<float> data(count, 1.0f);
  loomAllReduce(data.data(), data.data(), count, loomFloat32, loomSum, comm, nullptr);
}

// Rank 2 skips collective #4: ranks 0, 1 and 3 wait in it.
TEST(Doctor, NamesARankThatSkipsACollective) {
  Job job(4, 3, [](int rank, loomComm_t comm) {
    if (rank != 2) allReduce(comm);
  });
  ASSERT_TRUE(job.waitUntilIssued({4, 4, 3, 4}));
  const std::string text = job.text();
  EXPECT_NE(text.find("oldest operation not finished everywhere: #4 AllReduce of 1000 x float"), std::string::npos) << text;
  EXPECT_NE(text.find("NEVER ENTERED: rank 2 (its last operation: #3 AllReduce"), std::string::npos) << text;
  const nlohmann::json j = job.json();
  const nlohmann::json& o = j["report"]["oldest_unfinished"];
  EXPECT_EQ(o["seq"], 4) << j.dump();
  EXPECT_EQ(intsOrNone(o["never_entered"]), std::vector<int>({2})) << j.dump();
  EXPECT_EQ(intsOrNone(o["waiting"]), std::vector<int>({0, 1, 3})) << j.dump();
  // Whom they wait on (noted once a wait lasts 100 ms): whatever the algorithm, someone on rank 2.
  bool onTwo = false;
  for (const auto& [rank, peer] : o["waiting_on"].items()) onTwo = onTwo || peer == 2;
  EXPECT_TRUE(onTwo) << j.dump();
  EXPECT_NE(text.find("(on rank 2)"), std::string::npos) << text;
}

// Rank 0 is stuck in compute before #2: its process still answers (the doctor asks through it).
TEST(Doctor, NamesARankStuckInCompute) {
  Job job(3, 1, [](int rank, loomComm_t comm) {
    if (rank == 0) for (;;) sleepMs(1000);  // "computing"
    allReduce(comm);
  });
  ASSERT_TRUE(job.waitUntilIssued({1, 2, 2}));
  const std::string text = job.text();
  EXPECT_NE(text.find("(asked through rank 0)"), std::string::npos) << text;
  EXPECT_NE(text.find("NEVER ENTERED: rank 0"), std::string::npos) << text;
  EXPECT_NE(text.find("finished): the ranks waiting in #2 wait for it"), std::string::npos) << text;
  EXPECT_EQ(intsOrNone(job.json()["report"]["oldest_unfinished"]["waiting"]), std::vector<int>({1, 2}));
}

// Rank 1 calls a broadcast of 500 at #3 where the others allreduce 1000.
TEST(Doctor, NamesARankThatCalledAnotherCollective) {
  Job job(3, 2, [](int rank, loomComm_t comm) {
    std::vector<float> data(1000, 1.0f);
    if (rank == 1) loomBroadcast(data.data(), data.data(), 500, loomFloat32, 0, comm, nullptr);
    else allReduce(comm);
  });
  ASSERT_TRUE(job.waitUntilIssued({3, 3, 3}));
  const std::string text = job.text();
  EXPECT_NE(text.find("MISMATCH: rank 1 called Broadcast of 500 x float (root 0) at #3 where the others called AllReduce of "
                      "1000 x float"), std::string::npos) << text;
  const nlohmann::json j = job.json();
  ASSERT_EQ(j["report"]["oldest_unfinished"]["mismatched"].size(), 1u) << j.dump();
  EXPECT_EQ(j["report"]["oldest_unfinished"]["mismatched"][0]["rank"], 1);
}

// Rank 3 is killed: the others' next allreduce fails naming it; it cannot be asked (unreachable).
TEST(Doctor, NamesAKilledRank) {
  Job job(4, 2, [](int rank, loomComm_t comm) {
    if (rank == 3) raise(SIGKILL);
    allReduce(comm);
  });
  ASSERT_TRUE(job.waitUntilIssued({3, 3, 3, 0}));
  const std::string text = job.text();
  EXPECT_NE(text.find("UNREACHABLE: 3"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 3 did not answer"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 0 failed:"), std::string::npos) << text;
  const nlohmann::json j = job.json();
  EXPECT_EQ(intsOrNone(j["report"]["unreachable"]), std::vector<int>({3})) << j.dump();
  EXPECT_EQ(j["report"]["failures"].size(), 3u) << j.dump();
}

// --list names every process and communicator; --pid picks one; nothing answers once the job is gone.
TEST(Doctor, ListsTheProcessesAndFindsNothingWithoutAJob) {
  std::string sockets;
  {
    Job job(2, 1, [](int, loomComm_t) {});
    sockets = job.sockets();
    nlohmann::json list = nlohmann::json::parse(doctor("--list --json --dir " + sockets));
    ASSERT_EQ(list.size(), 2u) << list.dump();
    for (const auto& p : list) {
      ASSERT_EQ(p["comms"].size(), 1u);
      EXPECT_EQ(p["comms"][0]["nranks"], 2);
      EXPECT_EQ(p["comms"][0]["last_issued"], 1);
      EXPECT_EQ(p["comms"][0]["job"], list[0]["comms"][0]["job"]);
      // The all_reduce made this rank's send to its peer and its receive from it (at least).
      EXPECT_GE(p["comms"][0]["connections"]["memory_connections"], 2) << list.dump();
    }
    const std::string one = doctor("--list --pid " + std::to_string(job.pid(1)) + " --dir " + sockets);
    EXPECT_NE(one.find("rank 1 of 2: issued #1, finished up to #1"), std::string::npos) << one;
    EXPECT_NE(one.find("peers: 0 in this process, 1 by shared memory, 0 on other hosts (0 network connections open, "),
              std::string::npos)
        << one;
    EXPECT_EQ(one.find("rank 0 of 2"), std::string::npos) << one;
  }
  int status = 0;
  const std::string none = doctor("--dir " + sockets, &status);
  EXPECT_EQ(status, 2) << none;
  EXPECT_NE(none.find("no Loom process answered"), std::string::npos) << none;
}

// The ranks' operations time out: rank 0, the lowest-numbered failed rank, logs the job's report.
TEST(Doctor, ATimeoutLogsTheJobsReport) {
  Job job(3, 1, [](int rank, loomComm_t comm) {
    if (rank != 2) allReduce(comm);
  }, "1500");
  const std::string log = job.stderrOnceItSays(0, "NEVER ENTERED");
  EXPECT_NE(log.find("timed out; the job's state:"), std::string::npos) << log;
  EXPECT_NE(log.find("NEVER ENTERED: rank 2 (its last operation: #1 AllReduce"), std::string::npos) << log;
}

// SIGUSR1 to any rank's process: it logs the job's report (its own operation carries on waiting).
TEST(Doctor, SigusrOneLogsTheJobsReport) {
  Job job(3, 1, [](int rank, loomComm_t comm) {
    if (rank != 2) allReduce(comm);
  });
  ASSERT_TRUE(job.waitUntilIssued({2, 2, 1}));
  kill(job.pid(1), SIGUSR1);
  const std::string log = job.stderrOnceItSays(1, "NEVER ENTERED");
  EXPECT_NE(log.find("on signal 10, the job's state:"), std::string::npos) << log;
  EXPECT_NE(log.find("NEVER ENTERED: rank 2"), std::string::npos) << log;
  EXPECT_EQ(kill(job.pid(1), 0), 0) << "the signal ended the process";
}

// Three thread ranks of one process, rank 1 skipping #3: that process is asked for the report, and
// its one service thread gathers from its own ranks' state ports while it answers them; the same on
// SIGUSR1.
TEST(Doctor, ReportsOnThreadRanksOfOneProcess) {
  Job job(3, 2, [](int rank, loomComm_t comm) {
    if (rank != 1) allReduce(comm);
  }, "60000", Job::Ranks::Threads);
  ASSERT_TRUE(job.waitUntilIssued({3, 2, 3}));
  const std::string text = job.text();
  EXPECT_NE(text.find("(asked through rank 0)"), std::string::npos) << text;
  EXPECT_NE(text.find("NEVER ENTERED: rank 1 (its last operation: #2 AllReduce"), std::string::npos) << text;
  const nlohmann::json j = job.json();
  EXPECT_EQ(intsOrNone(j["report"]["oldest_unfinished"]["waiting"]), std::vector<int>({0, 2})) << j.dump();
  EXPECT_EQ(intsOrNone(j["report"]["unreachable"]), std::vector<int>()) << j.dump();
  kill(job.pid(0), SIGUSR1);
  const std::string log = job.stderrOnceItSays(0, "NEVER ENTERED");
  EXPECT_NE(log.find("on signal 10, the job's state:"), std::string::npos) << log;
  EXPECT_NE(log.find("NEVER ENTERED: rank 1"), std::string::npos) << log;
}

// With LOOM_DOCTOR=0 a job serves no state: the tool finds no process.
TEST(Doctor, OffServesNothing) {
  setenv("LOOM_DOCTOR", "0", 1);
  Job job(2, 1, [](int, loomComm_t) {});
  unsetenv("LOOM_DOCTOR");
  int status = 0;
  const std::string out = doctor("--dir " + job.sockets(), &status);
  EXPECT_EQ(status, 2) << out;
}

// A process with a communicator forks; the child (without the parent's service thread) makes its own:
// each process lists only its own communicator, and the parent's still answers after the child ended.
// (In a child process of this test, so that this process starts no thread before other tests fork.)
TEST(Doctor, AForkedChildServesItsOwnCommunicators) {
  char tmpl[] = "/tmp/loom-doctor-fork-XXXXXX";
  const std::string dir = mkdtemp(tmpl), sockets = dir + "/sockets";
  const pid_t parent = fork();
  if (parent == 0) {
    setenv("LOOM_DOCTOR_DIR", sockets.c_str(), 1);
    loomComm_t comm = nullptr;
    if (loomCommInitAll(&comm, 1, nullptr) != loomSuccess) _exit(10);
    const pid_t child = fork();
    if (child == 0) {
      loomComm_t mine = nullptr;
      if (loomCommInitAll(&mine, 1, nullptr) != loomSuccess) _exit(11);
      nlohmann::json list = nlohmann::json::parse(doctor("--list --json --dir " + sockets), nullptr, false);
      if (list.is_discarded() || list.size() != 2) _exit(12);
      for (const auto& p : list)
        if (p["comms"].size() != 1) _exit(13);
      loomCommDestroy(mine);
      _exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) _exit(20 + (WIFEXITED(status) ? WEXITSTATUS(status) : 9));
    // The child's socket went with its communicator; the parent's service still answers.
    nlohmann::json list = nlohmann::json::parse(doctor("--list --json --dir " + sockets), nullptr, false);
    if (list.is_discarded() || list.size() != 1 || list[0]["pid"] != getpid()) _exit(40);
    loomCommDestroy(comm);
    _exit(0);
  }
  int status = 0;
  waitpid(parent, &status, 0);
  std::system(("rm -rf '" + dir + "'").c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "exit " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1)
      << " (1x: init, 3x: the child's list, 4x: the parent's after it)";
}

}  // namespace
