// The rendezvous ("root"): collects one Hello + RankInfo from each of nranks ranks, then sends every
// rank the whole table. Runs on a detached thread; strangers and junk are dropped and logged.
#pragma once

#include "base/socket.h"
#include "bootstrap/unique_id.h"

namespace loom {

// Starts a root thread serving `id` on `listener` (already listening). It exits once every rank of
// one communicator has the table, or when LOOM_BOOTSTRAP_TIMEOUT_MS (default 10 min) passes.
void startRoot(Socket listener, const UniqueIdData& id);

}  // namespace loom
