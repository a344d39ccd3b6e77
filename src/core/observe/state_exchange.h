// Both ends of the state exchange: a rank's flight record as JSON (what loomCommDumpState returns),
// answered on the rank's state port to a request that proves the communicator's secret, and gathered
// from every rank of a job into the texts core/observe/hang_report.h lines up.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/socket.h"
#include "bootstrap/wire.h"

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

// This rank's state: {"comm", "rank", "nranks", "host", "pid"} and FlightRecord::json()'s fields.
// Takes no lock the operation path holds: it answers while the rank is wedged.
std::string commStateJson(const loomComm& comm);

// The serving end, on a connection accepted from a state port: the requester's hello (read within a
// short deadline) must prove `secret`; only then is the state sent.
Status readStateHello(const Socket& connection, const uint8_t* secret, int nranks);
Status sendState(const Socket& connection, const std::string& state);

// Every rank's state, asked in parallel; "" for a rank that did not answer by `deadline` (its reason
// is in *why[r] when why is given).
std::vector<std::string> gatherStates(const StateAddressBook& book, Deadline deadline,
                                      std::vector<std::string>* why = nullptr);

}  // namespace loom
