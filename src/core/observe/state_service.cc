// The service's registry of served communicators, its one thread and that thread's poll loop, which
// carries every connection and report itself (core/observe/conversation.h, state_gather.h): no thread
// per request, so that asking a wedged job costs it one thread however many ask, and a report can ask
// this process's own ranks while the same loop answers them.
#include "core/observe/state_service.h"

#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "base/log.h"
#include "base/settings.h"
#include "core/communicator.h"
#include "core/observe/conversation.h"
#include "core/observe/doctor_protocol.h"
#include "core/observe/dump_signal.h"
#include "core/observe/local_socket.h"
#include "core/observe/state_gather.h"
#include "core/observe/state_ports.h"

namespace loom {
namespace {

// How long a report may wait for ranks that do not answer: after a timeout the failing call waits
// for it (so keep it short: an answering rank replies in well under a millisecond, a loaded one in a
// few); loom-doctor's person can wait longer for a far host.
constexpr int kAfterTimeoutGatherMs = 500;
constexpr int kRequestGatherMs = 5000;
// How long the loop rests when accept finds no descriptor free (EMFILE and kin).
constexpr int kExhaustedPauseMs = 50;

bool outOfDescriptors(int error) { return error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM; }

// The job's report (doctor_protocol.h's report answer) from a gather that ended.
nlohmann::ordered_json gatheredReport(const StateGather& gather) {
  const StateAddressBook& book = gather.book();
  return reportAnswer(jobKey(book.secret), book.comm, gather.states(), gather.why());
}

std::string reportText(const StateGather& gather) { return gatheredReport(gather)["text"].get<std::string>(); }

struct Served {
  loomComm* comm = nullptr;
  Socket listener;
  StateAddressBook book;
};

// A connection the loop answers: accepted on the state port of communicator `served`, or (0) on the
// doctor socket, where a report request holds the gather that answers it.
struct Asked {
  Conversation conversation;
  uint64_t served = 0;
  std::optional<StateGather> report;
};

// What the loop has in hand besides its listeners.
struct LoopWork {
  std::vector<Asked> asked;
  std::vector<StateGather> signalReports;

  void addPollFds(std::vector<pollfd>* fds) {
    for (Asked& a : asked) {
      a.conversation.addPollFd(fds);
      if (a.report) a.report->addPollFds(fds);
    }
    for (StateGather& g : signalReports) g.addPollFds(fds);
  }
  // Until just past the nearest deadline (a millisecond late rather than polling again and again
  // within its last one); at once when a gather already ended (before any event).
  int pollTimeoutMs() const {
    int ms = -1;
    auto nearer = [&ms](Deadline d) {
      if (d.never()) return;
      const int left = d.expired() ? 0 : d.remainingMs(INT_MAX - 1) + 1;
      ms = ms < 0 ? left : std::min(ms, left);
    };
    for (const Asked& a : asked) {
      if (a.report && a.report->done()) return 0;
      nearer(a.report ? a.report->deadline() : a.conversation.deadline());
    }
    for (const StateGather& g : signalReports) {
      if (g.done()) return 0;
      nearer(g.deadline());
    }
    return ms;
  }
};

class Service {
 public:
  static Service& get() {
    static Service* service = new Service();  // never destroyed: its thread may run until the process exits
    return *service;
  }

  uint64_t add(loomComm* comm, Socket listener, StateAddressBook book) {
    std::lock_guard<std::mutex> life(lifecycle_);
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t id = nextId_++;
    served_[id] = std::make_unique<Served>(Served{comm, std::move(listener), std::move(book)});
    if (!running_) start();
    wake_.wake();
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
        wake_.wake();
        return;
      }
      quit_ = true;
      wake_.wake();
      stopping = std::move(thread_);
    }
    // The last communicator went: the thread and the socket go too (a process without communicators
    // is as it was before Loom, which matters to programs that fork afterwards).
    stopping.join();
    std::lock_guard<std::mutex> lock(mu_);
    running_ = false;
    toClose_.clear();
    local_.close();
  }

 private:
  Service() {
    pthread_atfork([] { get().beforeFork(); }, [] { get().afterForkInParent(); }, [] { get().afterForkInChild(); });
  }

  // Under mu_.
  void start() {
    if (const Status opened = wake_.open(); !opened.ok()) {
      LOOM_WARN(Init, "the state service cannot start: {}", opened.message());
      return;
    }
    (void)wake_.drain();
    local_.open();
    installDumpSignal();
    quit_ = false;
    running_ = true;
    thread_ = std::thread([this] { loop(); });
  }

  // What the loop has in hand is this thread's alone: a forked child, which has no such thread, never
  // touches it.
  void loop() {
    LoopWork work;
    std::vector<pollfd> fds;
    std::vector<uint64_t> ids;
    for (;;) {
      fds.clear();
      ids.clear();
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (quit_) return;
        toClose_.clear();
        fds.push_back({wake_.readFd(), POLLIN, 0});
        fds.push_back({local_.fd(), POLLIN, 0});
        for (const auto& [id, s] : served_) {
          fds.push_back({s->listener.fd(), POLLIN, 0});
          ids.push_back(id);
        }
      }
      work.addPollFds(&fds);
      if (poll(fds.data(), fds.size(), work.pollTimeoutMs()) < 0) continue;  // EINTR
      carryOn(work, fds);
      if ((fds[0].revents & POLLIN) && wake_.drain())
        for (const StateAddressBook& book : booksByJob("")) {
          work.signalReports.emplace_back(book, Deadline::afterMs(kRequestGatherMs));
        }
      bool exhausted = false;  // a listener stays readable while accept has no descriptor to give
      if (fds[1].revents & POLLIN) {
        errno = 0;
        if (Socket connection = local_.accept(); connection.valid())
          work.asked.push_back({Conversation(std::move(connection), 0), 0, std::nullopt});
        else
          exhausted = exhausted || outOfDescriptors(errno);
      }
      for (size_t i = 0; i < ids.size(); ++i)
        if (fds[i + 2].revents & POLLIN) {
          errno = 0;
          if (Socket connection = acceptStateRequest(fds[i + 2].fd); connection.valid())
            work.asked.push_back({Conversation(std::move(connection), kStateRequestBytes), ids[i], std::nullopt});
          else
            exhausted = exhausted || outOfDescriptors(errno);
        }
      // Out of descriptors: the pending connections wait in their backlog instead of the loop polling
      // and failing to accept them without pause.
      if (exhausted) std::this_thread::sleep_for(std::chrono::milliseconds(kExhaustedPauseMs));
    }
  }

  // Moves what is in hand on by the poll's events and the clock.
  void carryOn(LoopWork& work, const std::vector<pollfd>& fds) {
    for (Asked& a : work.asked) {
      if (a.report) {
        a.report->advance(fds);
        if (a.report->done()) {
          a.conversation.answer(answerLine(gatheredReport(*a.report)));
          a.report.reset();
        }
        continue;
      }
      std::optional<std::string> request;
      const Status moved = a.conversation.advance(fds, &request);
      if (!moved.ok() && a.served != 0) droppedStateRequest(a.served, moved);
      if (request && a.served != 0) answerRank(a, *request);
      else if (request) answerDoctor(a, *request);
    }
    std::erase_if(work.asked, [](const Asked& a) { return a.conversation.ended(); });
    for (StateGather& report : work.signalReports) {
      report.advance(fds);
      // Asked for: written whatever LOOM_DEBUG says.
      if (report.done())
        logWrite(LogLevel::Warn, LogSubsys::Init,
                 fmt::format("{} rank {}: on signal {}, the job's state:\n{}", report.book().comm, report.book().rank,
                             settingInt(Setting::DumpSignal), reportText(report)));
    }
    std::erase_if(work.signalReports, [](const StateGather& g) { return g.done(); });
  }

  void answerRank(Asked& asked, const std::string& request) {
    std::lock_guard<std::mutex> lock(mu_);  // the communicator stays while its state is read
    auto it = served_.find(asked.served);
    if (it == served_.end()) return asked.conversation.end();  // it went meanwhile
    std::string answer;
    if (const Status answered = answerStateRequest(request, it->second->book, *it->second->comm, &answer); !answered.ok()) {
      logDropped(*it->second, answered);
      return asked.conversation.end();
    }
    asked.conversation.answer(std::move(answer));
  }

  // A rank's request that failed (a stranger's or a late one's): worth a line when looking for why a
  // report misses a rank.
  void droppedStateRequest(uint64_t served, const Status& why) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = served_.find(served); it != served_.end()) logDropped(*it->second, why);
  }
  static void logDropped(const Served& served, const Status& why) {
    LOOM_INFO(Init, "{} rank {}: dropped a state request: {}", served.book.comm, served.book.rank, why.message());
  }

  void answerDoctor(Asked& asked, const std::string& line) {
    DoctorRequest request;
    if (const Status parsed = parseRequest(line, &request); !parsed.ok())
      return asked.conversation.answer(answerLine(errorAnswer(parsed.message())));
    if (request.what == kListRequest) return asked.conversation.answer(answerLine(listAnswer(getpid(), listed())));
    const std::vector<StateAddressBook> books = booksByJob(request.job);
    if (books.empty())
      return asked.conversation.answer(
          answerLine(errorAnswer("this process serves no communicator of job " + request.job)));
    asked.report.emplace(books[0], Deadline::afterMs(kRequestGatherMs));
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

  std::vector<ListedComm> listed() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<ListedComm> comms;
    for (const auto& [id, s] : served_) comms.push_back({commState(*s->comm), jobKey(s->book.secret)});
    return comms;
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
    quit_ = false;
    wake_.abandonInChild();
    local_.abandonInChild();
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
  WakePipe wake_;
  LocalSocket local_;
};

}  // namespace

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
  StateGather gather(book_, Deadline::afterMs(kAfterTimeoutGatherMs));
  gather.run();
  // Each rank whose own wait timed out gathers; the lowest-numbered of those logs the whole.
  int reporter = book_.rank;
  for (size_t r = 0; r < gather.states().size(); ++r)
    if (gather.states()[r] && gather.states()[r]->timedOut) reporter = std::min(reporter, static_cast<int>(r));
  if (reporter < book_.rank) {
    LOOM_INFO(Init, "{} rank {}: timed out; rank {} logs the job's hang report", book_.comm, book_.rank, reporter);
    return;
  }
  // Written whatever LOOM_DEBUG says (LOOM_HANG_REPORT=0 turns it off): it is what the timeout is for.
  logWrite(LogLevel::Warn, LogSubsys::Init,
           fmt::format("{} rank {}: timed out; the job's state:\n{}", book_.comm, book_.rank, reportText(gather)));
}

}  // namespace loom
