#include "bootstrap/host_election.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "base/hash.h"
#include "bootstrap/wire.h"

namespace loom {
namespace {

sockaddr_un hostName(const uint8_t* secret, uint64_t hostHash, socklen_t* len) {
  const uint64_t job = Fnv1a(0x686f7374).bytes(secret, kSecretBytes).digest();
  const std::string name = fmt::format("loom-boot-{:016x}-{:016x}", job, hostHash);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  a.sun_path[0] = '\0';  // abstract: no file, gone with the socket
  std::memcpy(a.sun_path + 1, name.data(), name.size());
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return a;
}

}  // namespace

Status claimHostLeadership(const uint8_t* secret, uint64_t hostHash, Socket* listener, bool* leads) {
  *leads = false;
  Socket s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) return systemError("socket(AF_UNIX): {}", std::strerror(errno));
  socklen_t len = 0;
  const sockaddr_un a = hostName(secret, hostHash, &len);
  if (::bind(s.fd(), reinterpret_cast<const sockaddr*>(&a), len) != 0) {
    if (errno == EADDRINUSE) return Status::Ok();
    return systemError("bind of the host's bootstrap name: {}", std::strerror(errno));
  }
  if (::listen(s.fd(), SOMAXCONN) != 0) return systemError("listen: {}", std::strerror(errno));
  LOOM_TRY(s.setNonBlocking(true));
  *listener = std::move(s);
  *leads = true;
  return Status::Ok();
}

Status connectToHostLeader(const uint8_t* secret, uint64_t hostHash, Deadline deadline, Socket* out, bool* noLeader) {
  *noLeader = false;
  socklen_t len = 0;
  const sockaddr_un a = hostName(secret, hostHash, &len);
  for (;;) {
    Socket s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!s.valid()) return systemError("socket(AF_UNIX): {}", std::strerror(errno));
    if (::connect(s.fd(), reinterpret_cast<const sockaddr*>(&a), len) == 0) {
      LOOM_TRY(s.setNonBlocking(true));
      *out = std::move(s);
      return Status::Ok();
    }
    if (errno == ECONNREFUSED || errno == ENOENT) {  // nobody holds the name (any more)
      *noLeader = true;
      return errorStatus(loomRemoteError, "no leader holds this host's bootstrap name");
    }
    if (errno != EINTR && errno != EAGAIN) return systemError("connecting to this host's leader: {}", std::strerror(errno));
    if (deadline.expired()) return errorStatus(loomTimeout, "connecting to this host's leader: timed out");
    ::usleep(1000);
  }
}

}  // namespace loom
