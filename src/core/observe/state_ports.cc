#include "core/observe/state_ports.h"

#include <sys/socket.h>

#include "base/settings.h"

namespace loom {

Status openStatePort(Socket* listener, uint16_t* port) {
  *port = 0;
  if (!settingFlag(Setting::Doctor)) return Status::Ok();
  SocketAddress local, bound;
  LOOM_TRY(chooseLocalAddress(&local));
  LOOM_TRY(listenOn(local, listener, &bound).withContext("the state port"));
  *port = bound.port;
  return Status::Ok();
}

Socket acceptStateRequest(int listener) { return Socket(accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK)); }

Status answerStateRequest(const std::string& request, const StateAddressBook& book, const loomComm& comm,
                          std::string* answer) {
  LOOM_TRY(checkStateHello(request, book.secret, book.nranks));
  *answer = framedState(commState(comm));
  return Status::Ok();
}

}  // namespace loom
