// The rendezvous ("root") of one communicator. Each rank connects once, presents a Hello and its
// RankInfo, and is answered at once with the rank that leads its host (the first of its host to
// join) before the connection closes, so the rendezvous holds one rank's socket at a time. Once all
// have joined it sends the compact table (rank_table.h) to host 0's leader only; the leaders pass it
// down their tree and to their hosts' ranks (bootstrap_tree.h). A job it must refuse (ranks that
// disagree on the rank count, or speak another wire version) is failed on every rank: each host's
// leader is told why, and so is every rank that joins later. Strangers and junk are dropped and logged.
#pragma once

#include "base/socket.h"
#include "bootstrap/traffic.h"
#include "bootstrap/unique_id.h"

namespace loom {

// Starts a thread serving `id` on `listener` (already listening). It exits once host 0's leader has
// the table (or every rank was told why the job failed), or when LOOM_BOOTSTRAP_TIMEOUT_MS passes.
void startRoot(Socket listener, const UniqueIdData& id);

// The same on the calling thread, counting what it moved into `traffic` (may be null).
void serveRendezvous(Socket listener, const UniqueIdData& id, BootstrapTraffic* traffic);

}  // namespace loom
