// What a communicator made of the topology, for people: LOOM_DEBUG_SUBSYS=graph logs the rings, trees,
// transports and NICs; LOOM_GRAPH_DUMP_FILE writes them as JSON and LOOM_TOPO_DUMP_FILE the host's graph
// as NCCL topology XML (rank 0 writes each, or every rank when the name holds %r).
#pragma once

#include <nlohmann/json.hpp>

#include "topology/graph.h"

struct loomComm;

namespace loom {

// The JSON of LOOM_GRAPH_DUMP_FILE: nranks, rank, hosts, rings, trees, transports (per peer of this rank:
// self, local, shm, p2p, net), nics (per rank: the NIC it uses, or null), channel_nics, models.
nlohmann::ordered_json topologyReport(const loomComm* comm);

// Logs and writes what the environment asks for, once the transports are set up; a file that cannot be
// written is a warning.
void reportJobTopology(const loomComm* comm);

// The transport rank `peer` is reached by, for people: the host connection (local, shm, net), or p2p
// when both ranks run on GPUs of this host that can reach each other.
const char* transportName(const loomComm* comm, int peer);

}  // namespace loom
