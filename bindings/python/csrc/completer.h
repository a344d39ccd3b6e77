// Completes Works in the order their operations were issued, on a thread of its own, so that
// futures (DDP's gradient hooks) complete without anyone calling wait(). A CUDA work completes once
// Loom finished its operation and its stream passed the work's mark.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "comm.h"
#include "work.h"

namespace loomtorch {

class Completer {
 public:
  explicit Completer(std::shared_ptr<Comm> comm);
  ~Completer();  // same as stop(false)

  void push(c10::intrusive_ptr<LoomWork> work);
  // Stops the thread: after the queued works completed, or (abort) failing them at once.
  void stop(bool abort);

 private:
  void run();

  std::shared_ptr<Comm> comm_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<c10::intrusive_ptr<LoomWork>> queue_;
  bool stopping_ = false;
  bool aborting_ = false;
  std::thread thread_;
};

}  // namespace loomtorch
