#include "core/observe/state_service.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/env.h"
#include "base/hash.h"
#include "base/log.h"
#include "base/settings.h"
#include "core/communicator.h"
#include "core/observe/hang_report.h"

namespace loom {
namespace {

// How long a report may wait for ranks that do not answer: after a timeout the failing call waits
// for it (so keep it short: an answering rank replies in well under a millisecond, a loaded one in a
// few); loom-doctor's person can wait longer for a far host.
constexpr int kAfterTimeoutGatherMs = 500;
constexpr int kRequestGatherMs = 5000;
constexpr int kRequestReadMs = 1000;
constexpr size_t kMaxRequestBytes = 4096;

// The service's wake pipe's write end, for the signal handler (async-signal-safe: one write).
std::atomic<int> gWakeFd{-1};

void onDumpSignal(int) {
  const int saved = errno;
  const int fd = gWakeFd.load(std::memory_order_relaxed);
  if (fd >= 0) {
    const char byte = 'S';
    [[maybe_unused]] ssize_t n = write(fd, &byte, 1);
  }
  errno = saved;
}

// The report of states gathered for `book` (why[r]: why rank r's is missing), as hangReportJson says.
nlohmann::ordered_json reportJson(const StateAddressBook& book, const std::vector<std::string>& states,
                                  const std::vector<std::string>& why) {
  std::string text, json;
  nlohmann::ordered_json answer;
  answer["job"] = jobKey(book.secret);
  answer["comm"] = book.comm;
  const Status analysed = analyzeHang(states, &text, &json);
  if (!analysed.ok()) {
    answer["error"] = analysed.message();
    return answer;
  }
  nlohmann::ordered_json unreachable = nlohmann::json::object();
  for (size_t r = 0; r < states.size(); ++r)
    if (states[r].empty()) {
      unreachable[std::to_string(r)] = why[r];
      text += fmt::format("  rank {} did not answer: {}\n", r, why[r]);
    }
  answer["text"] = text;
  answer["report"] = nlohmann::ordered_json::parse(json);
  answer["unreachable_why"] = unreachable;
  return answer;
}

// The job-wide report of `book`'s communicator, gathered by `deadline`: {"job", "comm", "text",
// "report" (loomHangReport's JSON), "unreachable_why": {rank: reason}}.
nlohmann::ordered_json hangReportJson(const StateAddressBook& book, Deadline deadline) {
  std::vector<std::string> why;
  const std::vector<std::string> states = gatherStates(book, deadline, &why);
  return reportJson(book, states, why);
}

struct Served {
  loomComm* comm = nullptr;
  Socket listener;
  StateAddressBook book;
};

class Service {
 public:
  static Service& get() {
    static Service* service = new Service();  // never destroyed: detached request threads may outlive main
    return *service;
  }

  uint64_t add(loomComm* comm, Socket listener, StateAddressBook book) {
    std::lock_guard<std::mutex> life(lifecycle_);
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t id = nextId_++;
    auto served = std::make_unique<Served>();
    served->comm = comm;
    served->listener = std::move(listener);
    served->book = std::move(book);
    served_[id] = std::move(served);
    if (!running_) start();
    wake('R');
    return id;
  }

  void remove(uint64_t id) {
    std::lock_guard<std::mutex> life(lifecycle_);
    std::thread stopping;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = served_.find(id);
      if (it == served_.end()) return;
      toClose_.push_back(std::move(it->second->listener));  // closed by the loop, once out of poll
      served_.erase(it);
      if (!served_.empty() || !running_) {
        wake('R');
        return;
      }
      quit_ = true;
      wake('Q');
      stopping = std::move(thread_);
    }
    // The last communicator went: the thread and the socket go too (a process without communicators
    // is as it was before Loom, which matters to programs that fork afterwards).
    stopping.join();
    std::lock_guard<std::mutex> lock(mu_);
    running_ = false;
    toClose_.clear();
    closeLocal(true);
  }

  // Copies of the books of this process's communicators, one per job.
  std::vector<StateAddressBook> booksByJob(const std::string& onlyJob) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<StateAddressBook> books;
    std::vector<std::string> seen;
    for (const auto& [id, s] : served_) {
      const std::string key = jobKey(s->book.secret);
      if ((!onlyJob.empty() && key != onlyJob) || std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
      seen.push_back(key);
      books.push_back(s->book);
    }
    return books;
  }

  nlohmann::ordered_json listComms() {
    std::lock_guard<std::mutex> lock(mu_);
    nlohmann::ordered_json comms = nlohmann::json::array();
    for (const auto& [id, s] : served_) {
      nlohmann::ordered_json c = nlohmann::ordered_json::parse(commStateJson(*s->comm));
      c.erase("entries");
      c["job"] = jobKey(s->book.secret);
      comms.push_back(c);
    }
    return comms;
  }

 private:
  Service() {
    pthread_atfork([] { get().beforeFork(); }, [] { get().afterForkInParent(); }, [] { get().afterForkInChild(); });
  }

  void wake(char why) {
    if (wake_[1] >= 0) [[maybe_unused]] ssize_t n = write(wake_[1], &why, 1);
  }

  // Under mu_.
  void start() {
    if (wake_[0] < 0) {
      if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
        LOOM_WARN(Init, "the state service cannot start: pipe: {}", std::strerror(errno));
        return;
      }
      gWakeFd.store(wake_[1]);
    }
    char drain[64];
    while (read(wake_[0], drain, sizeof drain) > 0) {
    }
    openLocal();
    installSignal();
    quit_ = false;
    running_ = true;
    thread_ = std::thread([this] { loop(); });
  }

  void installSignal() {
    static std::once_flag once;
    std::call_once(once, [] {
      const int sig = static_cast<int>(settingInt(Setting::DumpSignal));
      if (sig <= 0) return;
      struct sigaction current {};
      if (sigaction(sig, nullptr, &current) != 0) return;
      if (current.sa_handler != SIG_DFL || (current.sa_flags & SA_SIGINFO)) {
        LOOM_INFO(Init, "signal {} is handled by the program: Loom does not log hang reports on it", sig);
        return;
      }
      struct sigaction action {};
      action.sa_handler = onDumpSignal;
      sigemptyset(&action.sa_mask);
      action.sa_flags = SA_RESTART;
      sigaction(sig, &action, nullptr);
    });
  }

  // Under mu_. The per-process socket loom-doctor asks: in LOOM_DOCTOR_DIR (a bad one is warned about
  // and the default used), which must be a directory of this user alone.
  void openLocal() {
    std::string why;
    if (settingIsSet(Setting::DoctorDir)) {
      if (bindLocal(settingText(Setting::DoctorDir), &why)) return;
      LOOM_WARN(Init, "LOOM_DOCTOR_DIR={}: {}; using {} instead", settingText(Setting::DoctorDir), why,
                defaultDoctorDirectory());
    }
    if (!bindLocal(defaultDoctorDirectory(), &why)) LOOM_INFO(Init, "loom-doctor cannot reach this process: {}", why);
  }

  bool bindLocal(const std::string& dir, std::string* why) {
    mkdir(dir.c_str(), 0700);
    struct stat st {};
    if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      *why = fmt::format("{} is not a directory and cannot be made: {}", dir, std::strerror(errno));
      return false;
    }
    if (st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
      *why = fmt::format("{} is not this user's alone (owner {}, mode {:o})", dir, st.st_uid, st.st_mode & 0777);
      return false;
    }
    const std::string path = dir + "/" + std::to_string(getpid()) + ".sock";
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof(addr.sun_path)) {
      *why = fmt::format("the socket path {} is too long", path);
      return false;
    }
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    Socket s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    unlink(path.c_str());  // one left by an earlier process with this pid (a killed one removes nothing)
    if (!s.valid() || bind(s.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(s.fd(), 16) != 0) {
      *why = fmt::format("{}: {}", path, std::strerror(errno));
      return false;
    }
    local_ = std::move(s);
    localPath_ = path;
    static std::once_flag atExit;
    std::call_once(atExit, [] { std::atexit([] { get().unlinkAtExit(); }); });
    return true;
  }

  // Under mu_.
  void closeLocal(bool unlinkIt) {
    if (unlinkIt && !localPath_.empty()) unlink(localPath_.c_str());
    local_.close();
    localPath_.clear();
  }

  void unlinkAtExit() {
    std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);  // exit may come from anywhere
    if (!localPath_.empty()) unlink(localPath_.c_str());
  }

  void loop() {
    std::vector<pollfd> fds;
    std::vector<uint64_t> ids;
    for (;;) {
      fds.clear();
      ids.clear();
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (quit_) return;
        toClose_.clear();
        fds.push_back({wake_[0], POLLIN, 0});
        fds.push_back({local_.valid() ? local_.fd() : -1, POLLIN, 0});
        for (const auto& [id, s] : served_) {
          fds.push_back({s->listener.fd(), POLLIN, 0});
          ids.push_back(id);
        }
      }
      if (poll(fds.data(), fds.size(), -1) < 0) continue;  // EINTR
      if (fds[0].revents & POLLIN) {
        char bytes[64];
        ssize_t n;
        while ((n = read(wake_[0], bytes, sizeof bytes)) > 0)
          for (ssize_t i = 0; i < n; ++i)
            if (bytes[i] == 'S') std::thread([] { get().logReportsOnSignal(); }).detach();
      }
      if (fds[1].fd >= 0 && (fds[1].revents & POLLIN)) {
        const int fd = accept4(fds[1].fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) std::thread([fd] { get().answerDoctor(Socket(fd)); }).detach();
      }
      for (size_t i = 0; i < ids.size(); ++i) {
        if (!(fds[i + 2].revents & POLLIN)) continue;
        const int fd = accept4(fds[i + 2].fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) std::thread([fd, id = ids[i]] { get().answerRank(id, Socket(fd)); }).detach();
      }
    }
  }

  // Another rank asks for this rank's state on the communicator's port.
  void answerRank(uint64_t id, Socket connection) {
    StateAddressBook book;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = served_.find(id);
      if (it == served_.end()) return;
      book = it->second->book;
    }
    const Status hello = readStateHello(connection, book.secret, book.nranks);
    if (!hello.ok()) {
      LOOM_INFO(Init, "{} rank {}: dropped a state request: {}", book.comm, book.rank, hello.message());
      return;
    }
    std::string state;
    {
      std::lock_guard<std::mutex> lock(mu_);  // the communicator stays while its state is read
      auto it = served_.find(id);
      if (it == served_.end()) return;
      state = commStateJson(*it->second->comm);
    }
    (void)sendState(connection, state);
  }

  // loom-doctor: one JSON request line, one JSON answer, then the connection closes.
  void answerDoctor(Socket connection) {
    ucred peer{};
    socklen_t len = sizeof peer;
    if (getsockopt(connection.fd(), SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 ||
        (peer.uid != geteuid() && peer.uid != 0))
      return;
    std::string request;
    const Deadline deadline = Deadline::afterMs(kRequestReadMs);
    char c = 0;
    while (request.size() < kMaxRequestBytes && recvAll(connection, &c, 1, deadline, nullptr).ok() && c != '\n')
      request += c;
    nlohmann::ordered_json answer;
    try {
      const nlohmann::json j = nlohmann::json::parse(request);
      const std::string what = j.value("request", "");
      if (what == "list") {
        answer["pid"] = getpid();
        answer["comms"] = listComms();
      } else if (what == "report") {
        const std::vector<StateAddressBook> books = booksByJob(j.value("job", ""));
        if (books.empty()) {
          answer["error"] = "this process serves no communicator of job " + j.value("job", "");
        } else {
          answer = hangReportJson(books[0], Deadline::afterMs(kRequestGatherMs));
        }
      } else {
        answer["error"] = "unknown request '" + what + "' (list, report)";
      }
    } catch (const std::exception& e) {
      answer["error"] = std::string("bad request: ") + e.what();
    }
    const std::string text = answer.dump() + "\n";
    (void)sendAll(connection, text.data(), text.size(), Deadline::afterMs(kRequestReadMs), nullptr);
  }

  void logReportsOnSignal() {
    for (const StateAddressBook& book : booksByJob("")) {
      const nlohmann::ordered_json report = hangReportJson(book, Deadline::afterMs(kRequestGatherMs));
      // Asked for: written whatever LOOM_DEBUG says.
      logWrite(LogLevel::Warn, LogSubsys::Init,
               fmt::format("{} rank {}: on signal {}, the job's state:\n{}", book.comm, book.rank,
                           settingInt(Setting::DumpSignal), report.value("text", report.value("error", ""))));
    }
  }

  void beforeFork() {
    lifecycle_.lock();
    mu_.lock();
  }
  void afterForkInParent() {
    mu_.unlock();
    lifecycle_.unlock();
  }
  // The child has none of the threads: it serves nothing of the parent's (its own communicators
  // start a service of their own) and leaves the parent's socket file alone.
  void afterForkInChild() {
    served_.clear();
    toClose_.clear();
    new (&thread_) std::thread();  // forget the parent's thread (the child does not have it)
    running_ = false;
    // A pipe of its own: the parent's thread still reads the inherited one.
    gWakeFd.store(-1);
    for (int& fd : wake_) {
      if (fd >= 0) close(fd);
      fd = -1;
    }
    quit_ = false;
    closeLocal(false);
    mu_.unlock();
    lifecycle_.unlock();
  }

  std::mutex lifecycle_;  // orders starting and stopping the thread; taken before mu_
  std::mutex mu_;
  std::map<uint64_t, std::unique_ptr<Served>> served_;
  std::vector<Socket> toClose_;
  uint64_t nextId_ = 1;
  bool running_ = false;
  bool quit_ = false;
  std::thread thread_;
  int wake_[2] = {-1, -1};
  Socket local_;
  std::string localPath_;
};

}  // namespace

Status openStatePort(Socket* listener, uint16_t* port) {
  *port = 0;
  if (!settingFlag(Setting::Doctor)) return Status::Ok();
  SocketAddress local, bound;
  LOOM_TRY(chooseLocalAddress(&local));
  LOOM_TRY(listenOn(local, listener, &bound).withContext("the state port"));
  LOOM_TRY(listener->setNonBlocking(true));
  *port = bound.port;
  return Status::Ok();
}

std::unique_ptr<StateServing> serveState(loomComm* comm, Socket listener, const uint8_t* secret) {
  StateAddressBook book = stateAddressBook(*comm, secret);
  const uint64_t id = listener.valid() ? Service::get().add(comm, std::move(listener), book) : 0;
  return std::make_unique<StateServing>(id, std::move(book));
}

StateServing::~StateServing() {
  if (id_ != 0) Service::get().remove(id_);
}

void StateServing::reportAfterTimeout() {
  if (id_ == 0 || !settingFlag(Setting::HangReport) || reported_.exchange(true)) return;
  std::vector<std::string> why;
  const std::vector<std::string> states = gatherStates(book_, Deadline::afterMs(kAfterTimeoutGatherMs), &why);
  // Each rank whose own wait timed out gathers; the lowest-numbered of those logs the whole.
  int reporter = book_.rank;
  for (size_t r = 0; r < states.size(); ++r) {
    if (states[r].empty()) continue;
    const nlohmann::json state = nlohmann::json::parse(states[r], nullptr, false);
    if (!state.is_discarded() && state.value("timed_out", false)) reporter = std::min(reporter, static_cast<int>(r));
  }
  if (reporter < book_.rank) {
    LOOM_INFO(Init, "{} rank {}: timed out; rank {} logs the job's hang report", book_.comm, book_.rank, reporter);
    return;
  }
  const nlohmann::ordered_json answer = reportJson(book_, states, why);
  // Written whatever LOOM_DEBUG says (LOOM_HANG_REPORT=0 turns it off): it is what the timeout is for.
  logWrite(LogLevel::Warn, LogSubsys::Init,
           fmt::format("{} rank {}: timed out; the job's state:\n{}", book_.comm, book_.rank,
                       answer.value("text", answer.value("error", ""))));
}

std::string doctorDirectory() {
  const std::string dir = settingText(Setting::DoctorDir);
  return dir.empty() ? defaultDoctorDirectory() : dir;
}

std::string defaultDoctorDirectory() {
  if (const std::string runtime = envString("XDG_RUNTIME_DIR", ""); !runtime.empty()) return runtime + "/loom";
  return "/tmp/loom-" + std::to_string(geteuid());
}

std::string jobKey(const uint8_t* secret) {
  return fmt::format("{:016x}", Fnv1a().bytes(secret, kSecretBytes).digest());
}


}  // namespace loom
