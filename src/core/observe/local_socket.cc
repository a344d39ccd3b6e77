#include "core/observe/local_socket.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "base/log.h"
#include "base/settings.h"
#include "core/observe/doctor_protocol.h"

namespace loom {
namespace {

// The socket file to remove at exit. Exit may come from any thread while the service runs, so the
// handler reads a plain buffer, published by the flag, instead of taking a lock.
char gFileAtExit[sizeof(sockaddr_un{}.sun_path)];
std::atomic<bool> gRemoveAtExit{false};

void removeAtExit() {
  if (gRemoveAtExit.load(std::memory_order_acquire)) unlink(gFileAtExit);
}

}  // namespace

void LocalSocket::open() {
  std::string why;
  if (settingIsSet(Setting::DoctorDir)) {
    if (bindIn(settingText(Setting::DoctorDir), &why)) return;
    LOOM_WARN(Init, "LOOM_DOCTOR_DIR={}: {}; using {} instead", settingText(Setting::DoctorDir), why,
              defaultDoctorDirectory());
  }
  if (!bindIn(defaultDoctorDirectory(), &why)) LOOM_INFO(Init, "loom-doctor cannot reach this process: {}", why);
}

bool LocalSocket::bindIn(const std::string& dir, std::string* why) {
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
  const std::string path = processSocketPath(dir, getpid());
  sockaddr_un addr;
  if (const Status named = processSocketAddress(path, &addr); !named.ok()) {
    *why = named.message();
    return false;
  }
  Socket s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  unlink(path.c_str());  // one left by an earlier process with this pid (a killed one removes nothing)
  if (!s.valid() || bind(s.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(s.fd(), 16) != 0) {
    *why = fmt::format("{}: {}", path, std::strerror(errno));
    return false;
  }
  listener_ = std::move(s);
  path_ = path;
  std::memcpy(gFileAtExit, path.c_str(), path.size() + 1);
  gRemoveAtExit.store(true, std::memory_order_release);
  static std::once_flag atExit;
  std::call_once(atExit, [] { std::atexit(removeAtExit); });
  return true;
}

Socket LocalSocket::accept() {
  Socket connection(accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
  ucred peer{};
  socklen_t len = sizeof peer;
  if (connection.valid() && (getsockopt(connection.fd(), SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 ||
                             (peer.uid != geteuid() && peer.uid != 0)))
    connection.close();
  return connection;
}

void LocalSocket::close() {
  gRemoveAtExit.store(false, std::memory_order_release);
  if (!path_.empty()) unlink(path_.c_str());
  listener_.close();
  path_.clear();
}

void LocalSocket::abandonInChild() {
  gRemoveAtExit.store(false, std::memory_order_release);
  listener_.close();
  path_.clear();
}

}  // namespace loom
