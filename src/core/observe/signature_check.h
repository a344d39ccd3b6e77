// LOOM_CHECK=1: before each collective, ranks compare what they were asked to do (kind, count,
// datatype, operator, root, sequence number) over the bootstrap network. A mismatch becomes
// loomInvalidUsage describing both sides, before any data moves, instead of a hang or corruption.
#pragma once

#include "core/run/operation.h"

namespace loom {

Status checkCollectiveSignature(loomComm_t comm, const Operation& op, uint64_t seq);

}  // namespace loom
