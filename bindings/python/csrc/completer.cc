#include "completer.h"

#include <chrono>

#include <c10/util/Exception.h>

#include "loom_error.h"

namespace loomtorch {

namespace {
constexpr int64_t kPollMs = 100;  // loomCommWaitOp wakes on completion; this only bounds stop latency
// Once Loom finished a CUDA operation only copies remain before its mark on the stream: polled
// (rather than waited for in CUDA) so that an abort is still noticed.
constexpr auto kStreamPoll = std::chrono::microseconds(50);
}

Completer::Completer(std::shared_ptr<Comm> comm) : comm_(std::move(comm)), thread_([this] { run(); }) {}

Completer::~Completer() { stop(false); }

void Completer::push(c10::intrusive_ptr<LoomWork> work) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(work));
  }
  changed_.notify_all();
}

void Completer::stop(bool abort) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    aborting_ = aborting_ || abort;
  }
  changed_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void Completer::run() {
  for (;;) {
    c10::intrusive_ptr<LoomWork> work;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      work = queue_.front();
    }
    std::exception_ptr error;
    for (;;) {
      bool abort;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        abort = aborting_;
      }
      if (abort) {
        error = loomError(loomRemoteError, "operation", "process group '" + comm_->name() + "' was aborted");
        break;
      }
      try {
        loomResult_t r = comm_->waitOp(work->opId(), kPollMs);
        if (r == loomInProgress) continue;
        if (r != loomSuccess) {
          error = commError(r, work->describe(), comm_->get());
        } else if (!work->streamPassed()) {
          std::this_thread::sleep_for(kStreamPoll);
          continue;
        }
      } catch (...) {
        error = std::current_exception();
      }
      break;
    }
    work->complete(error);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.pop_front();
    }
    changed_.notify_all();
  }
}

}  // namespace loomtorch
