// The socket provider's helper threads (LOOM_SOCKET_NTHREADS): each serves a share of the data
// streams of every comm of one provider instance, so a large message moves while the thread that
// posted it computes. A helper spins through its streams while any moves, then sleeps in poll() on the
// ones that would block and on an eventfd that producers write when they queue work for a sleeper.
//
// CompletionSignal is how helpers wake the driving thread: an eventfd it polls while it waits, written
// when a message's last piece is done.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "transport/connection.h"
#include "transport/net/socket/data_stream.h"

namespace loom::net::socket {

class CompletionSignal {
 public:
  CompletionSignal();
  ~CompletionSignal();
  CompletionSignal(const CompletionSignal&) = delete;
  CompletionSignal& operator=(const CompletionSignal&) = delete;

  void notify();
  // The driving thread, before it sleeps: poll the eventfd, or do not sleep at all when a completion
  // came after the previous call (the caller has looked at its requests since then).
  void addWaits(WaitList* waits);

 private:
  int fd_ = -1;
  std::atomic<uint64_t> count_{0};
  uint64_t seen_ = 0;  // driving thread only
};

class HelperThread {
 public:
  explicit HelperThread(CompletionSignal* signal);
  ~HelperThread();
  void attach(std::shared_ptr<DataStream> stream);
  // After it returns the helper never touches the stream again.
  void detach(DataStream* stream);
  // The producer queued a piece: wakes the helper if it sleeps.
  void kick();

 private:
  void run();
  static bool anyHasWork(const std::vector<DataStream*>& idle);

  CompletionSignal* signal_;
  std::mutex mutex_;
  std::vector<std::shared_ptr<DataStream>> streams_;
  uint64_t version_ = 0;
  std::atomic<bool> sleeping_{false};
  std::atomic<bool> stop_{false};
  int wakeFd_ = -1;
  std::thread thread_;
};

}  // namespace loom::net::socket
