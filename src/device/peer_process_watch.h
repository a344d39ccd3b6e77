// The rank processes whose FIFOs this rank mapped through CUDA IPC (peers on this host, in other
// processes, sharing its GPU): a thread that sleeps in poll on their pidfds and reports each that
// exits, so that a plan kernel waiting on a dead process stops at once rather than at LOOM_TIMEOUT_MS
// (peers on other hosts have their network lanes, whose proxy reports a broken connection). Where a
// pidfd cannot be had (Linux before 5.3), it looks every 100 ms instead.
#pragma once

#include <functional>
#include <thread>
#include <vector>

namespace loom::device {

struct PeerProcess {
  int rank = -1;
  int pid = 0;
};

class PeerProcessWatch {
 public:
  // `exited` runs on the watch's thread, once per peer.
  PeerProcessWatch(std::vector<PeerProcess> peers, std::function<void(const PeerProcess&)> exited);
  ~PeerProcessWatch();  // stops the thread and waits for it
  PeerProcessWatch(const PeerProcessWatch&) = delete;
  PeerProcessWatch& operator=(const PeerProcessWatch&) = delete;

 private:
  void run();

  std::vector<PeerProcess> peers_;
  std::vector<int> pidfds_;  // by peer; -1 where none could be opened
  std::function<void(const PeerProcess&)> exited_;
  int stopFd_ = -1;  // an eventfd written to stop the thread
  std::thread thread_;
};

}  // namespace loom::device
