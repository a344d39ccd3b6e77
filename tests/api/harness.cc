#include "harness.h"

#include "unique_id_pipe.h"

#include <execinfo.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

namespace loomtest {
namespace {

constexpr size_t kNoteBytes = 512;

// Notes live in shared anonymous memory so a parent can read what a hung child was doing.
class NoteBoard {
 public:
  explicit NoteBoard(int nranks) : bytes_(static_cast<size_t>(nranks) * kNoteBytes) {
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) std::abort();
    base_ = static_cast<char*>(p);
  }
  ~NoteBoard() { munmap(base_, bytes_); }
  char* slot(int rank) { return base_ + static_cast<size_t>(rank) * kNoteBytes; }

 private:
  size_t bytes_;
  char* base_;
};

std::string effectiveTransport(Launch launch, const std::string& requested) {
  if (!requested.empty()) return requested;
  return launch == Launch::Processes ? "shm" : "local";
}

std::string runBodyCatching(const RankBody& body, RankContext& ctx) {
  try {
    return body(ctx);
  } catch (const std::exception& e) {
    return std::string("exception: ") + e.what();
  } catch (...) {
    return "unknown exception";
  }
}

// A body that aborted its communicator (after a failed call) sets ctx.comm to null.
std::string destroyUnlessAborted(RankContext& ctx, std::string result) {
  if (ctx.comm == nullptr) return result;
  ctx.note("loomCommDestroy");
  loomResult_t r = loomCommDestroy(ctx.comm);
  if (r != loomSuccess && result.empty()) result = callFailure("loomCommDestroy", r, nullptr);
  ctx.comm = nullptr;
  return result;
}

// Body wrapper for runRanks: init, body, destroy.
std::string initRunDestroy(const RankBody& body, RankContext& ctx) {
  ctx.note("loomCommInitRank");
  loomComm_t comm = nullptr;
  loomResult_t r = loomCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank);
  if (r != loomSuccess) return callFailure("loomCommInitRank", r, nullptr);
  if (comm == nullptr) return "loomCommInitRank succeeded but returned a null communicator";
  ctx.comm = comm;
  std::string result = runBodyCatching(body, ctx);
  return destroyUnlessAborted(ctx, result);
}

std::string joinFailures(const std::vector<std::string>& perRank) {
  std::ostringstream os;
  for (size_t r = 0; r < perRank.size(); ++r)
    if (!perRank[r].empty()) os << "rank " << r << ": " << perRank[r] << "\n";
  return os.str();
}

[[noreturn]] void dieOnThreadTimeout(Launch launch, int nranks, const std::string& transport, int timeoutSec,
                                     NoteBoard& board, const std::vector<std::atomic<bool>>& finished) {
  std::fprintf(stderr,
               "\n*** HANG: %d %s ranks over transport '%s' did not finish within %d s. Threads cannot "
               "be killed, so the test binary exits now. What each rank was doing:\n",
               nranks, launchName(launch), transport.c_str(), timeoutSec);
  for (int r = 0; r < nranks; ++r)
    std::fprintf(stderr, "  rank %d: %s%s\n", r, finished[r].load() ? "(finished) " : "", board.slot(r));
  std::fflush(stderr);
  std::_Exit(3);
}

std::string runThreads(Launch launch, int nranks, const RunOptions& options, const RankBody& wrapped,
                       const loomUniqueId& id, std::vector<loomComm_t>* initAllComms) {
  NoteBoard board(nranks);
  const std::string transport = effectiveTransport(launch, options.transport);
  std::vector<std::string> results(nranks);
  std::vector<std::atomic<bool>> finished(nranks);
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      RankContext ctx;
      ctx.rank = r;
      ctx.nranks = nranks;
      ctx.launch = launch;
      ctx.transport = transport;
      ctx.id = id;
      ctx.noteSlot = board.slot(r);
      if (initAllComms) ctx.comm = (*initAllComms)[r];
      results[r] = runBodyCatching(wrapped, ctx);
      finished[r] = true;
      std::lock_guard<std::mutex> lock(mu);
      ++done;
      cv.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options.timeoutSec);
    if (!cv.wait_until(lock, deadline, [&] { return done == nranks; }))
      dieOnThreadTimeout(launch, nranks, transport, options.timeoutSec, board, finished);
  }
  for (auto& t : threads) t.join();
  return joinFailures(results);
}

std::string describeExit(int status, const char* note) {
  std::ostringstream os;
  if (WIFSIGNALED(status)) {
    os << "child killed by signal " << WTERMSIG(status) << " (" << strsignal(WTERMSIG(status))
       << ") while: " << note;
  } else if (WIFEXITED(status)) {
    os << "child exited with status " << WEXITSTATUS(status) << " without a message, last doing: " << note;
  } else {
    os << "child ended with wait status " << status;
  }
  return os.str();
}

// A rank process that crashes (an abort in a library, a fatal signal, an uncaught exception) writes
// what it can into its result pipe, so the failure the test prints says where: CI shows a test's
// stdout, where its stderr may be cut.
int gCrashFd = -1;

void writeCrash(const char* text) {
  if (gCrashFd >= 0) [[maybe_unused]] ssize_t n = write(gCrashFd, text, strlen(text));
}

void onCrashSignal(int sig) {
  char line[96];
  snprintf(line, sizeof line, "crashed with signal %d (%s); backtrace:\n", sig, strsignal(sig));
  writeCrash(line);
  void* frames[48];
  backtrace_symbols_fd(frames, backtrace(frames, 48), gCrashFd);
  raise(sig);  // SA_RESETHAND: the default action now, so the parent sees the signal
}

void reportCrashesTo(int fd) {
  gCrashFd = fd;
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) {
    struct sigaction current {};
    sigaction(sig, nullptr, &current);
    if (current.sa_handler != SIG_DFL) continue;  // a sanitizer's, which reports better
    struct sigaction action {};
    action.sa_handler = onCrashSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESETHAND;
    sigaction(sig, &action, nullptr);
  }
  std::set_terminate([] {
    std::string what = "std::terminate";
    try {
      if (std::exception_ptr e = std::current_exception()) std::rethrow_exception(e);
    } catch (const std::exception& e) {
      what += std::string(" (uncaught exception: ") + e.what() + ")";
    } catch (...) {
      what += " (uncaught exception)";
    }
    writeCrash((what + "\n").c_str());
    std::abort();
  });
}

std::string runProcesses(int nranks, const RunOptions& options, const RankBody& wrapped) {
  NoteBoard board(nranks);
  const std::string transport = effectiveTransport(Launch::Processes, options.transport);
  std::vector<pid_t> pids(nranks, -1);
  std::vector<int> readFds(nranks, -1);
  int idPipe[2];
  if (pipe(idPipe) != 0) return std::string("pipe: ") + strerror(errno);
  std::fflush(nullptr);  // nothing buffered may be written twice by the children
  for (int r = 0; r < nranks; ++r) {
    auto killStarted = [&](const char* what) {
      std::string err = std::string(what) + ": " + strerror(errno);
      close(idPipe[0]);
      close(idPipe[1]);
      for (int k = 0; k < r; ++k) {
        kill(pids[k], SIGKILL);
        waitpid(pids[k], nullptr, 0);
        close(readFds[k]);
      }
      return err;
    };
    int fds[2];
    if (pipe(fds) != 0) return killStarted("pipe");
    pid_t pid = fork();
    if (pid < 0) {
      close(fds[0]);
      close(fds[1]);
      return killStarted("fork");
    }
    if (pid == 0) {
      close(fds[0]);
      for (int k = 0; k < r; ++k) close(readFds[k]);
      reportCrashesTo(fds[1]);
      RankContext ctx;
      ctx.rank = r;
      ctx.nranks = nranks;
      ctx.launch = Launch::Processes;
      ctx.transport = transport;
      ctx.noteSlot = board.slot(r);
      std::string msg = options.placeRank ? options.placeRank(r) : "";
      if (msg.empty() && shareUniqueIdFromRankZero(r, nranks, idPipe, &ctx.id, &msg)) msg = runBodyCatching(wrapped, ctx);
      size_t off = 0;
      while (off < msg.size()) {
        ssize_t w = write(fds[1], msg.data() + off, msg.size() - off);
        if (w <= 0) break;
        off += static_cast<size_t>(w);
      }
      close(fds[1]);
      _exit(msg.empty() ? 0 : 1);
    }
    close(fds[1]);
    pids[r] = pid;
    readFds[r] = fds[0];
  }
  close(idPipe[0]);
  close(idPipe[1]);

  std::vector<std::string> messages(nranks), results(nranks);
  std::vector<bool> reaped(nranks, false);
  std::vector<int> statuses(nranks, 0);
  if (options.cpuSeconds) options.cpuSeconds->assign(nranks, 0.0);
  int remaining = nranks;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options.timeoutSec);
  auto drain = [&](int r, bool block) {
    char buf[4096];
    while (readFds[r] >= 0) {
      if (!block) {
        pollfd p{readFds[r], POLLIN, 0};
        if (poll(&p, 1, 0) <= 0) return;
      }
      ssize_t n = read(readFds[r], buf, sizeof buf);
      if (n > 0) {
        messages[r].append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      close(readFds[r]);
      readFds[r] = -1;
    }
  };
  auto reap = [&](int r, int flags) {
    int status = 0;
    rusage usage{};
    pid_t got = wait4(pids[r], &status, flags, &usage);
    if (got != pids[r]) return false;
    reaped[r] = true;
    statuses[r] = status;
    if (options.cpuSeconds)
      (*options.cpuSeconds)[r] = usage.ru_utime.tv_sec + usage.ru_utime.tv_usec * 1e-6 +
                                 usage.ru_stime.tv_sec + usage.ru_stime.tv_usec * 1e-6;
    --remaining;
    return true;
  };
  while (remaining > 0 && std::chrono::steady_clock::now() < deadline) {
    std::vector<pollfd> polls;
    for (int r = 0; r < nranks; ++r)
      if (readFds[r] >= 0) polls.push_back({readFds[r], POLLIN, 0});
    if (!polls.empty()) poll(polls.data(), polls.size(), 20);
    else usleep(20000);
    for (int r = 0; r < nranks; ++r) {
      drain(r, false);
      if (!reaped[r]) reap(r, WNOHANG);
    }
  }
  for (int r = 0; r < nranks; ++r) {
    if (!reaped[r]) {
      results[r] = "timed out after " + std::to_string(options.timeoutSec) +
                   " s (killed); last doing: " + std::string(board.slot(r));
      kill(pids[r], SIGKILL);
      reap(r, 0);
      if (readFds[r] >= 0) {
        close(readFds[r]);
        readFds[r] = -1;
      }
      continue;
    }
    drain(r, true);
    int st = statuses[r];
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && messages[r].empty()) continue;
    results[r] = !messages[r].empty() ? messages[r] : describeExit(st, board.slot(r));
    if (!messages[r].empty() && WIFSIGNALED(st)) results[r] += " [then " + describeExit(st, board.slot(r)) + "]";
  }
  return joinFailures(results);
}

std::string run(Launch launch, int nranks, const RunOptions& options, const RankBody& wrapped) {
  std::optional<ScopedEnv> env;
  env.emplace("LOOM_TRANSPORT", options.transport.empty() ? nullptr : options.transport.c_str());
  if (launch == Launch::ThreadsInitAll) {
    std::vector<loomComm_t> comms(nranks, nullptr);
    loomResult_t r = loomCommInitAll(comms.data(), nranks, nullptr);
    if (r != loomSuccess) return callFailure("loomCommInitAll", r, nullptr);
    for (int i = 0; i < nranks; ++i)
      if (comms[i] == nullptr) return "loomCommInitAll succeeded but comms[" + std::to_string(i) + "] is null";
    return runThreads(launch, nranks, options, wrapped, loomUniqueId{}, &comms);
  }
  if (launch == Launch::Processes) return runProcesses(nranks, options, wrapped);
  loomUniqueId id;
  loomResult_t r = loomGetUniqueId(&id);
  if (r != loomSuccess) return callFailure("loomGetUniqueId", r, nullptr);
  return runThreads(launch, nranks, options, wrapped, id, nullptr);
}

}  // namespace

const char* launchName(Launch launch) {
  switch (launch) {
    case Launch::Threads: return "threads";
    case Launch::ThreadsInitAll: return "threads(initall)";
    case Launch::Processes: return "processes";
  }
  return "?";
}

void RankContext::note(const std::string& what) const {
  if (!noteSlot) return;
  size_t n = std::min(what.size(), kNoteBytes - 1);
  std::memcpy(noteSlot, what.data(), n);
  noteSlot[n] = '\0';
}

std::string RankContext::where() const {
  return "ranks=" + std::to_string(nranks) + " launch=" + launchName(launch) + " transport=" + transport;
}

std::string runRanks(Launch launch, int nranks, const RunOptions& options, const RankBody& body) {
  if (launch == Launch::ThreadsInitAll) {
    RankBody wrapped = [&](RankContext& ctx) {
      std::string result = runBodyCatching(body, ctx);
      return destroyUnlessAborted(ctx, result);
    };
    return run(launch, nranks, options, wrapped);
  }
  RankBody wrapped = [&](RankContext& ctx) { return initRunDestroy(body, ctx); };
  return run(launch, nranks, options, wrapped);
}

std::string runRanksRaw(Launch launch, int nranks, const RunOptions& options, const RankBody& body) {
  if (launch == Launch::ThreadsInitAll) return "runRanksRaw: ThreadsInitAll is not a raw launch";
  return run(launch, nranks, options, body);
}

std::string callFailure(const char* call, loomResult_t result, loomComm_t comm) {
  std::ostringstream os;
  const char* str = loomGetErrorString(result);
  const char* last = loomGetLastError(comm);
  os << call << " returned " << static_cast<int>(result) << " (" << (str ? str : "null") << "): "
     << (last ? last : "(null last error)");
  return os.str();
}

}  // namespace loomtest
