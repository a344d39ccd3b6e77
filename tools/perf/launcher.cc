#include "launcher.h"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <exception>
#include <thread>
#include <vector>

#include "id_file.h"
#include "loom_error.h"
#include "rank_process.h"

namespace loomperf {
namespace {

using Clock = std::chrono::steady_clock;

const auto kProcessStart = std::chrono::system_clock::now();
// How long rank processes may take to leave after SIGTERM before SIGKILL.
constexpr auto kTermGrace = std::chrono::seconds(2);
// Extra time the parent gives children beyond -T, so that their own watchdog reports first.
constexpr auto kParentTimeoutSlack = std::chrono::seconds(5);
constexpr auto kDefaultIdWait = std::chrono::seconds(120);

volatile std::sig_atomic_t gStopSignal = 0;
void onStopSignal(int sig) { gStopSignal = sig; }

void signalAll(const std::vector<pid_t>& children, int sig) {
  for (pid_t pid : children)
    if (pid > 0) kill(pid, sig);
}

int statusCode(int waitStatus) {
  if (WIFEXITED(waitStatus)) return WEXITSTATUS(waitStatus);
  if (WIFSIGNALED(waitStatus)) return 128 + WTERMSIG(waitStatus);
  return kExitError;
}

// Reaps the rank processes. The first one to fail (other than by finding wrong results, which every
// rank learns at the same time and reports by itself) stops the rest: its peers could only hang.
int supervise(std::vector<pid_t> children, int timeoutSec) {
  struct sigaction sa {};
  sa.sa_handler = onStopSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  const auto deadline = timeoutSec > 0 ? Clock::now() + std::chrono::seconds(timeoutSec) + kParentTimeoutSlack
                                       : Clock::time_point::max();
  int result = kExitOk;
  bool stopping = false;
  Clock::time_point killAt{};
  auto stop = [&](int code) {
    if (stopping) return;
    stopping = true;
    if (result == kExitOk || result == kExitWrong) result = code;
    signalAll(children, SIGTERM);
    killAt = Clock::now() + kTermGrace;
  };

  size_t alive = children.size();
  while (alive > 0) {
    int waitStatus = 0;
    const pid_t pid = waitpid(-1, &waitStatus, WNOHANG);
    if (pid > 0) {
      const auto it = std::find(children.begin(), children.end(), pid);
      if (it == children.end()) continue;
      const int index = static_cast<int>(it - children.begin());
      *it = -1;
      --alive;
      const int code = statusCode(waitStatus);
      if (code == kExitWrong && result == kExitOk) result = kExitWrong;
      if (code != kExitOk && code != kExitWrong && !stopping) {
        std::fprintf(stderr, "loom-perf: rank process %d (pid %d) %s %d; stopping the others\n", index,
                     static_cast<int>(pid),
                     WIFSIGNALED(waitStatus) ? "killed by signal" : "exited with status",
                     WIFSIGNALED(waitStatus) ? WTERMSIG(waitStatus) : code);
        stop(code);
      }
      continue;
    }
    if (pid < 0 && errno != EINTR) break;
    if (gStopSignal != 0 && !stopping) stop(128 + gStopSignal);
    if (Clock::now() > deadline && !stopping) {
      std::fprintf(
          stderr, "loom-perf: rank processes still running %d s after -T; stopping them\n",
          static_cast<int>(std::chrono::duration_cast<std::chrono::seconds>(kParentTimeoutSlack).count()));
      stop(kExitTimeout);
    }
    if (stopping && Clock::now() > killAt) signalAll(children, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return result;
}

// -np N: the parent makes the id, forks N rank processes that inherit it, and supervises them.
int runForked(const Options& o) {
  loomUniqueId id{};
  check(loomGetUniqueId(&id), "loomGetUniqueId", nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t parent = getpid();
  std::vector<pid_t> children;
  for (int p = 0; p < o.nprocs; ++p) {
    const pid_t pid = fork();
    if (pid < 0) {
      std::perror("loom-perf: fork");
      signalAll(children, SIGKILL);
      for (pid_t c : children) waitpid(c, nullptr, 0);
      return kExitError;
    }
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // no orphaned ranks if the parent is killed
      if (getppid() != parent) std::_Exit(kExitError);
      const int code = runRankProcess(o, p, o.nprocs, id);
      std::fflush(stdout);
      std::fflush(stderr);
      std::_Exit(code);
    }
    children.push_back(pid);
  }
  return supervise(children, o.timeoutSec);
}

// mpiexec & co.: this process is one rank (times -t threads); the id goes through a file.
int runUnderLauncher(Options o, const LauncherRank& self) {
  o.nprocs = self.size;
  const std::string path = idFilePath();
  loomUniqueId id{};
  std::function<void()> afterInit;
  if (self.rank == 0) {
    check(loomGetUniqueId(&id), "loomGetUniqueId", nullptr);
    publishId(path, id);
    afterInit = [path] { withdrawId(path); };
  } else {
    const auto wait = o.timeoutSec > 0 ? std::chrono::seconds(o.timeoutSec) : kDefaultIdWait;
    id = awaitId(path, wait, kProcessStart);
  }
  return runRankProcess(o, self.rank, self.size, id, afterInit);
}

}  // namespace

int launch(const Options& o) {
  try {
    if (o.nprocs > 1) return runForked(o);
    if (const auto self = detectLauncher()) return runUnderLauncher(o, *self);
    loomUniqueId id{};
    check(loomGetUniqueId(&id), "loomGetUniqueId", nullptr);
    return runRankProcess(o, 0, 1, id);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loom-perf: %s\n", e.what());
    return kExitError;
  }
}

}  // namespace loomperf
