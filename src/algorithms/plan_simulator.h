// Times plans on a modelled machine by running them, event by event, the way the executor does: lanes
// advance independently, a lane's steps in order; a step starts when its lane reached it, its incoming
// message has arrived and (for a send) the connection has a free slot; it occupies its rank's engine for
// stepUs plus its bytes at copyGbs; a message then crosses its link, occupying the sender's and the
// receiver's port (or NIC) for bytes/bandwidth, and arrives one hop latency later; the receiving step
// frees the slot when it ends. Pipelining over chunks and channels, FIFO depth and contention for ports
// and NICs are not formulas here: they come out of the run.
//
// Symmetric runs: when shifting every rank by g maps both the machine and the plans onto themselves,
// all ranks r + i*g behave like r, so only plans for ranks 0..g-1 are run, and a message to rank q goes
// to rank q mod g, as if sent by the sender shifted by the same amount. See cost_model.h for when that
// holds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "algorithms/machine_model.h"
#include "algorithms/plan.h"
#include "base/status.h"

namespace loom {

struct SimulationResult {
  double timeUs = 0;      // when the last lane of any rank finishes
  uint64_t steps = 0;     // steps executed (of the simulated ranks)
  uint64_t messages = 0;  // messages sent (of the simulated ranks)
  // The busiest resource's total work: the most time any port, NIC or rank engine spent moving bytes
  // or running steps. A bound no pipelining can beat: timeUs >= busiestUs.
  double busiestUs = 0;
};

// plans[r] is rank r's plan, for ranks 0..plans.size()-1; plans.size() must divide machine.nranks, and
// fewer plans than ranks means a symmetric run with g = plans.size(). Fails with loomInternalError when
// the plans cannot complete (deadlock, unmatched messages: for example plans that are not symmetric).
Status simulatePlans(const MachineModel& machine, const std::vector<Plan>& plans, size_t elemSize,
                     SimulationResult* result);

}  // namespace loom
