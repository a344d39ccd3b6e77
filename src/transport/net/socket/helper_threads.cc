#include "transport/net/socket/helper_threads.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>

namespace loom::net::socket {

namespace {

void drain(int fd) {
  uint64_t value = 0;
  while (::read(fd, &value, sizeof value) > 0) {
  }
}

void ping(int fd) {
  const uint64_t one = 1;
  (void)!::write(fd, &one, sizeof one);
}

}  // namespace

CompletionSignal::CompletionSignal() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

CompletionSignal::~CompletionSignal() {
  if (fd_ >= 0) ::close(fd_);
}

void CompletionSignal::notify() {
  count_.fetch_add(1, std::memory_order_seq_cst);
  ping(fd_);
}

void CompletionSignal::addWaits(WaitList* waits) {
  // Drain first, then compare: a completion after the comparison writes the eventfd again, so the
  // poll that follows returns at once; one before it is caught by the count.
  drain(fd_);
  const uint64_t now = count_.load(std::memory_order_seq_cst);
  if (now != seen_) {
    seen_ = now;
    waits->capSleep(0);
  } else {
    waits->add(fd_, POLLIN);
  }
}

HelperThread::HelperThread(CompletionSignal* signal)
    : signal_(signal), wakeFd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)), thread_([this] { run(); }) {}

HelperThread::~HelperThread() {
  stop_.store(true);
  ping(wakeFd_);
  thread_.join();
  ::close(wakeFd_);
}

void HelperThread::attach(std::shared_ptr<DataStream> stream) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    streams_.push_back(std::move(stream));
    ++version_;
  }
  ping(wakeFd_);
}

void HelperThread::detach(DataStream* stream) {
  stream->closed.store(true);
  { std::lock_guard<std::mutex> wait(stream->busy); }  // a move in progress finishes first
  {
    std::lock_guard<std::mutex> lock(mutex_);
    streams_.erase(std::remove_if(streams_.begin(), streams_.end(), [&](const auto& s) { return s.get() == stream; }),
                   streams_.end());
    ++version_;
  }
  ping(wakeFd_);  // the helper lets go of the stream (and its socket) at its next turn
}

void HelperThread::kick() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (sleeping_.load(std::memory_order_seq_cst)) ping(wakeFd_);
}

bool HelperThread::anyHasWork(const std::vector<DataStream*>& idle) {
  return std::any_of(idle.begin(), idle.end(), [](DataStream* s) { return s->hasWork(); });
}

void HelperThread::run() {
  std::vector<std::shared_ptr<DataStream>> mine;  // keeps detached streams alive until the next refresh
  uint64_t seenVersion = ~0ull;
  std::vector<pollfd> fds;
  std::vector<DataStream*> idle;  // had nothing queued in this turn
  while (!stop_.load(std::memory_order_relaxed)) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (seenVersion != version_) {
        mine = streams_;
        seenVersion = version_;
      }
    }
    bool moved = false;
    fds.clear();
    idle.clear();
    for (const auto& stream : mine) {
      std::lock_guard<std::mutex> busy(stream->busy);
      if (stream->closed.load(std::memory_order_relaxed)) continue;
      // A few pieces per turn, so one busy stream does not starve the others.
      for (int turn = 0; turn < 4; ++turn) {
        const DataStream::Progress p = stream->progress(signal_);
        if (p == DataStream::Progress::Moved) {
          moved = true;
          continue;
        }
        if (p == DataStream::Progress::Blocked) fds.push_back(pollfd{stream->fd(), stream->pollEvents(), 0});
        if (p == DataStream::Progress::Idle) idle.push_back(stream.get());
        break;
      }
    }
    if (moved) continue;
    // Announce the sleep, then look once more: a producer that queued before seeing the announcement
    // is caught here, one that queued after it writes the eventfd.
    sleeping_.store(true, std::memory_order_seq_cst);
    if (!anyHasWork(idle)) {
      fds.push_back(pollfd{wakeFd_, POLLIN, 0});
      ::poll(fds.data(), fds.size(), -1);
      drain(wakeFd_);
    }
    sleeping_.store(false, std::memory_order_relaxed);
  }
}

}  // namespace loom::net::socket
