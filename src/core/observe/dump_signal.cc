#include "core/observe/dump_signal.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "base/log.h"
#include "base/settings.h"

namespace loom {
namespace {

constexpr char kDumpByte = 'S';
constexpr char kWakeByte = 'W';

// The wake pipe's write end, for the handler.
std::atomic<int> gDumpFd{-1};

void onDumpSignal(int) {
  const int saved = errno;
  const int fd = gDumpFd.load(std::memory_order_relaxed);
  if (fd >= 0) [[maybe_unused]] ssize_t n = write(fd, &kDumpByte, 1);
  errno = saved;
}

}  // namespace

Status WakePipe::open() {
  if (fds_[0] < 0 && pipe2(fds_, O_CLOEXEC | O_NONBLOCK) != 0) return systemError("pipe: {}", std::strerror(errno));
  gDumpFd.store(fds_[1]);
  return Status::Ok();
}

void WakePipe::wake() {
  if (fds_[1] >= 0) [[maybe_unused]] ssize_t n = write(fds_[1], &kWakeByte, 1);
}

bool WakePipe::drain() {
  bool dump = false;
  char bytes[64];
  ssize_t n;
  while ((n = read(fds_[0], bytes, sizeof bytes)) > 0)
    for (ssize_t i = 0; i < n; ++i) dump = dump || bytes[i] == kDumpByte;
  return dump;
}

void WakePipe::abandonInChild() {
  gDumpFd.store(-1);
  for (int& fd : fds_) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
}

void installDumpSignal() {
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

}  // namespace loom
