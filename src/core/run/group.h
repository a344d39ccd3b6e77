// Groups (loomGroupStart/End): operations called inside a group are recorded per thread and run
// together at the outermost loomGroupEnd, so that sends and receives that must progress together do,
// and one thread can drive several communicators at once. Outside a group an operation is a group
// of one. Within a group, each communicator runs its collectives in call order, then all its
// point-to-point operations fused into one plan.
#pragma once

#include <functional>

#include "core/run/operation.h"

namespace loom {

// Validates and runs (or records, inside a group) one operation.
Status submitOperation(const Operation& op);
// Whether this thread is inside loomGroupStart/End.
bool inGroup();
// Runs `init` (a communicator's creation) at this thread's outermost group end, before the group's
// operations and side by side with the group's other inits, each on a thread of its own: so one
// thread can create the communicators of several ranks in one group, as NCCL's grouped init does
// (nccl-tests creates every rank's this way). That end fails with the first init that failed.
void deferToGroupEnd(std::function<Status()> init);
Status groupStart();
Status groupEnd();
// Ends the group like groupEnd, but runs nothing: *estimatedUs is what the cost model predicts the
// group would take (0 for an inner level, whose operations the outermost end decides).
Status groupSimulateEnd(double* estimatedUs);

}  // namespace loom
