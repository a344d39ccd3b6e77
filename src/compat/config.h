// ncclConfig_t, read as NCCL reads it: by the caller's own header (size, magic, version), so that a
// program compiled against an older or newer nccl.h passes only the fields its struct has. The
// fields Loom serves (blocking, commName, splitShare) become a loomConfig_t; the others tune NCCL's
// kernels and transports, which Loom's planner decides for itself: accepted, not used.
#pragma once

#include "compat/nccl_abi.h"
#include "loom.h"

namespace loom::compat {

// `config` may be null (every default). Fails with ncclInvalidArgument, naming what is wrong, for a
// struct that was not made with NCCL_CONFIG_INITIALIZER or holds a value out of range.
ncclResult_t readConfig(const ncclConfig_t* config, loomConfig_t* out);

}  // namespace loom::compat
