#include "device/peer_process_watch.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "base/process_exit.h"

namespace loom::device {

namespace {

constexpr int kLookMs = 100;  // without pidfds: how often the peers are looked at

}  // namespace

PeerProcessWatch::PeerProcessWatch(std::vector<PeerProcess> peers, std::function<void(const PeerProcess&)> exited)
    : peers_(std::move(peers)), exited_(std::move(exited)), stopFd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  for (const PeerProcess& p : peers_) pidfds_.push_back(openPidfd(p.pid));
  thread_ = std::thread([this] { run(); });
}

PeerProcessWatch::~PeerProcessWatch() {
  const uint64_t one = 1;
  (void)!::write(stopFd_, &one, sizeof one);
  thread_.join();
  for (int fd : pidfds_)
    if (fd >= 0) ::close(fd);
  if (stopFd_ >= 0) ::close(stopFd_);
}

void PeerProcessWatch::run() {
  std::vector<bool> reported(peers_.size(), false);
  std::vector<pollfd> fds;
  std::vector<size_t> whose;  // fds[i + 1] is peers_[whose[i]]'s pidfd
  for (;;) {
    fds.assign(1, pollfd{stopFd_, POLLIN, 0});
    whose.clear();
    bool looking = false;  // some unreported peer has no pidfd: poll wakes every kLookMs to look
    for (size_t i = 0; i < peers_.size(); ++i) {
      if (reported[i]) continue;
      if (pidfds_[i] >= 0) {
        fds.push_back(pollfd{pidfds_[i], POLLIN, 0});
        whose.push_back(i);
      } else {
        looking = true;
      }
    }
    if (fds.size() == 1 && !looking) return;  // every peer reported: nothing left to watch
    if (::poll(fds.data(), fds.size(), looking ? kLookMs : -1) < 0 && errno != EINTR) return;
    if (fds[0].revents & POLLIN) return;
    for (size_t k = 0; k < whose.size(); ++k)
      if (fds[k + 1].revents & (POLLIN | POLLHUP | POLLERR)) {
        reported[whose[k]] = true;
        exited_(peers_[whose[k]]);
      }
    if (looking)
      for (size_t i = 0; i < peers_.size(); ++i)
        if (!reported[i] && pidfds_[i] < 0 && processExited(peers_[i].pid, -1)) {
          reported[i] = true;
          exited_(peers_[i]);
        }
  }
}

}  // namespace loom::device
