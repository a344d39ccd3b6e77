// Groups (loomGroupStart/End): operations called inside a group are recorded per thread and run
// together at the outermost loomGroupEnd, so that sends and receives that must progress together do,
// and one thread can drive several communicators at once. Outside a group an operation is a group
// of one. Within a group, each communicator runs its collectives in call order, then all its
// point-to-point operations fused into one plan.
#pragma once

#include "core/run/operation.h"

namespace loom {

// Validates and runs (or records, inside a group) one operation.
Status submitOperation(const Operation& op);
Status groupStart();
Status groupEnd();
// Ends the group like groupEnd, but runs nothing: *estimatedUs is what the cost model predicts the
// group would take (0 for an inner level, whose operations the outermost end decides).
Status groupSimulateEnd(double* estimatedUs);

}  // namespace loom
