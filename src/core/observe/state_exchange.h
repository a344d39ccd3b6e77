// Both ends of the state exchange between the ranks of a job: a rank's state (what loomCommDumpState
// returns), the book of where every rank of a communicator answers for its state, and the wire between
// an asker (core/observe/state_gather.h) and a state port (core/observe/state_ports.h): the asker's
// Hello proves the communicator's secret, the answer is the state's JSON behind its 4-byte size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/socket.h"
#include "base/status.h"
#include "bootstrap/wire.h"
#include "core/observe/comm_state.h"

struct loomComm;

namespace loom {

// What one rank needs to ask every rank of its communicator for its state.
struct StateAddressBook {
  uint8_t secret[kSecretBytes] = {0};
  int rank = 0;
  int nranks = 1;
  std::string comm;                        // the communicator's name
  std::vector<SocketAddress> stateAddresses;  // rank r's state port; port 0: it serves none
};

// The book of a communicator whose init exchanged the ranks' state ports.
StateAddressBook stateAddressBook(const loomComm& comm, const uint8_t* secret);

// This rank's state. Takes no lock the operation path holds: it answers while the rank is wedged.
CommState commState(const loomComm& comm);

// A state larger than this is refused (64 entries take a few KiB).
constexpr uint32_t kMaxStateBytes = 1u << 20;

// The request an asker sends to a state port of `book`'s communicator.
Hello stateHello(const StateAddressBook& book);
// Whether `request` (sizeof(Hello) bytes) proves `secret`; why not.
Status checkStateHello(const std::string& request, const uint8_t* secret, int nranks);
// The answer: the state's size (host order, the job's hosts share it) and its JSON.
std::string framedState(const CommState& state);

}  // namespace loom
