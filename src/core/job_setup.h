// A communicator's topology at init (topology/job_topology.h says how a job's topology is built): this
// host's graph (LOOM_TOPO_FILE or live discovery, loaded once per process), this rank's place in it, two
// exchanges through the bootstrap, and the job's rings and NICs that every rank then agrees on; then the
// tuners' machine models from it (algorithms/machine_model.h's jobMachine, as loom-sim builds them).
// LOOM_GRAPH_DUMP_FILE and LOOM_TOPO_DUMP_FILE write what was decided; LOOM_DEBUG_SUBSYS=graph logs it.
#pragma once

#include <memory>
#include <vector>

#include "algorithms/machine_model.h"
#include "base/status.h"
#include "topology/job_topology.h"

struct loomComm;

namespace loom {

// Builds comm->job and the communicator's tuners. Needs comm->bootstrap and comm->transports.
Status setUpJobTopology(loomComm* comm);

// The machine a communicator's tuner prices plans on: jobMachine of its job, in the shape
// LOOM_RANKS_PER_NODE emulates, with its FIFO slots.
MachineModel commMachine(const loomComm& comm, MemorySide side, const GpuSharing& sharing = {});
// The rings the communicator's tuners plan with (the job's, shared with it, or none where
// LOOM_RANKS_PER_NODE emulates nodes).
std::shared_ptr<const std::vector<std::vector<int>>> tunerRings(const loomComm& comm);

// Once the communicator's plan kernels are set up (Ready): its device tuner prices plans with the copy
// rate of the GPU its ranks share, which only that setup measures.
void adoptDeviceFabric(loomComm* comm);

}  // namespace loom
