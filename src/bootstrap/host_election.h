// Which rank leads its host's part of a communicator's bootstrap: the first to claim an abstract unix
// socket named after the communicator's secret and the host (ProcessIdentity::hostHash). The others
// connect to it there, without asking the rendezvous, so only one rank per host talks to the
// rendezvous (root.h). Abstract names live in a network namespace: simulated hosts in namespaces of
// their own, or with LOOM_HOSTID (another hash, another name), each elect their own leader.
#pragma once

#include <cstdint>

#include "base/clock.h"
#include "base/socket.h"
#include "base/status.h"

namespace loom {

// Claims the host's name: true with `listener` listening when this rank leads, false when another
// rank holds the name.
Status claimHostLeadership(const uint8_t* secret, uint64_t hostHash, Socket* listener, bool* leads);

// Connects to the host's leader. `noLeader` is set (with an error) when nobody holds the name any
// more (the leader went before this rank came): the caller claims it again.
Status connectToHostLeader(const uint8_t* secret, uint64_t hostHash, Deadline deadline, Socket* out, bool* noLeader);

}  // namespace loom
