// A rank's state as one communicator sees it: who it is, its flight record's operations and how far
// they got, whom a lasting wait is on, and the error that broke it. One type from where it is read
// (FlightRecord::snapshot, commState) to where it is lined up (core/observe/hang_report.h), so that
// its JSON, which loomCommDumpState returns and tools read, is written and parsed in this one place
// and only where a state leaves the process or comes in (the C API, the state ports).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/status.h"

namespace loom {

// One recorded operation.
struct CommStateEntry {
  uint64_t seq = 0;
  std::string op;     // the collective's name
  uint64_t count = 0;
  std::string dtype;  // the datatype's name
  int peer = -1;      // the root or the send/recv peer; -1 for none
  int64_t ageUs = 0;  // since it was issued
};

// The peers a rank reaches, by transport, and the connections it holds open: a send and a receive per
// peer and channel, the network's made at init, the memory peers' on first use. loom-doctor --list
// shows them.
struct CommConnections {
  int localPeers = 0;  // rank threads of this process (memory)
  int shmPeers = 0;    // other processes of this host (a shared-memory segment each, mapped)
  int netPeers = 0;    // ranks on other hosts
  int netConnections = 0;
  int memoryConnections = 0;  // to local and shm peers, made so far
};

struct CommState {
  std::string comm;  // the communicator's name
  int rank = 0;
  int nranks = 1;
  std::string host;
  int pid = 0;
  uint64_t lastIssued = 0;
  uint64_t completedUpTo = 0;
  int waitingOn = -1;      // the peer a lasting wait is on; -1 for none
  bool timedOut = false;   // this rank's own wait ran past the timeout
  std::string failure;     // the first error, "" while it works
  std::vector<CommStateEntry> entries;  // oldest first
  CommConnections connections;
};

// Keys as loomCommDumpState has always written them: "comm", "rank", "nranks", "host", "pid",
// "completed_up_to", "entries" [{"age_us", "count", "dtype", "op", "peer", "seq"}], "failure",
// "last_issued", "timed_out", "waiting_on", then "connections" {"local_peers", "shm_peers",
// "net_peers", "net_connections", "memory_connections"}. Reading needs only the flight record's counters and entries (a
// hand-made state for loomHangReport may leave the rest out).
void to_json(nlohmann::ordered_json& j, const CommStateEntry& entry);
void from_json(const nlohmann::ordered_json& j, CommStateEntry& entry);
void to_json(nlohmann::ordered_json& j, const CommState& state);
void from_json(const nlohmann::ordered_json& j, CommState& state);

// The same as text, for the wire and the C API.
std::string commStateText(const CommState& state);
// invalidArgument, saying what is wrong, for text that is not such a state.
Status parseCommState(const std::string& text, CommState* out);

}  // namespace loom
