// Predicted time of one rank's share of a group of sends and receives, from the machine model alone:
// the peers' plans are theirs, so unlike a collective nothing is simulated. Transfers to different
// peers and the two directions run at once (the p2p builder gives each its own lane), so the group
// lasts as long as its busiest side: the bytes through the rank's port into the node's fabric, or
// through its share of its NIC (every rank of a node is assumed to move as much at once, as pipeline
// stages and all-to-all patterns do), each direction on its own, plus the CPU's copies of every byte (host
// memory: copyGbs), one latency of the farthest peer, and the executor's step per message.
#pragma once

#include <cstdint>
#include <span>

#include "algorithms/machine_model.h"
#include "algorithms/plan.h"

namespace loom {

// `ops` as the p2p builder takes them (counts in elements of elemSize bytes; kAnyPeer receives are
// timed as from the farthest rank); messages are cut at chunkBytes.
double predictPointToPointUs(const MachineModel& machine, int rank, std::span<const P2pOp> ops, size_t elemSize,
                             uint64_t chunkBytes);

}  // namespace loom
