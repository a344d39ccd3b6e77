// The machine model's fields a caller may set by name (loomModelConfig_t::machine, loom-sim's flags,
// the planner's `machine=` dict): one table of names, each with its field and whether 0 is allowed.
#pragma once

#include <map>
#include <string>

#include "algorithms/machine_model.h"
#include "base/status.h"

namespace loom::model {

using MachineFields = std::map<std::string, double>;

// "intra_gbs=240,nic_gbs=25" (commas or spaces between entries) into fields; fails naming an unknown
// field, a value that is not a number, or one out of its range.
Status parseMachineFields(const std::string& text, MachineFields* fields);

// Checks names and ranges (what parseMachineFields checks, for fields given as a map).
Status checkMachineFields(const MachineFields& fields);

// Sets the fields on a machine. latency_us also sets net_latency_us unless that is given.
void applyMachineFields(const MachineFields& fields, MachineModel* machine);

}  // namespace loom::model
