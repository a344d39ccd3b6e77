// The state ports: each communicator's TCP listener on which the job's other ranks ask this rank for
// its state (core/observe/state_gather.h asks). It is opened before the rendezvous so that its number
// travels in the rank's RankInfo, and a request must prove the communicator's secret: the port is
// reachable from the network, and a state tells what the job runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/socket.h"
#include "base/status.h"
#include "bootstrap/wire.h"
#include "core/observe/state_exchange.h"

struct loomComm;

namespace loom {

// The communicator's state port; no listener and port 0 with LOOM_DOCTOR=0.
Status openStatePort(Socket* listener, uint16_t* port);

// A connection waiting on a state port's listener (non-blocking); none when none waits.
Socket acceptStateRequest(int listener);

// A request on a state port is one Hello.
constexpr size_t kStateRequestBytes = sizeof(Hello);

// The answer to `request` on the state port of `comm` (whose book is `book`): its state behind its
// size, once the request proves the communicator's secret; else why it is refused.
Status answerStateRequest(const std::string& request, const StateAddressBook& book, const loomComm& comm,
                          std::string* answer);

}  // namespace loom
