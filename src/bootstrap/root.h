// The rendezvous ("root") of one communicator. Only hosts' leaders talk to it (host_election.h): each
// sends its host's records (a Hello and a RankInfo per rank) in batches, each on a short connection,
// and the rendezvous reads at most kRendezvousMaxOpen such connections at once, holding no socket per
// host or rank. Once all have joined it sends the compact table (rank_table.h) to host 0's leader
// only; the leaders pass it down their tree and to their hosts' ranks (bootstrap_tree.h). A job it
// must refuse (ranks that disagree on the rank count, or speak another wire version) is failed on
// every rank: each host's leader is told why, and so is every rank that joins later. Strangers and
// junk are dropped and logged.
#pragma once

#include "base/socket.h"
#include "bootstrap/traffic.h"
#include "bootstrap/unique_id.h"

namespace loom {

// The leaders' connections the rendezvous reads at once (poll); more wait in its listener's queue.
constexpr size_t kRendezvousMaxOpen = 64;

// Starts a thread serving `id` on `listener` (already listening). It exits once host 0's leader has
// the table (or every rank was told why the job failed), or when LOOM_BOOTSTRAP_TIMEOUT_MS passes.
void startRoot(Socket listener, const UniqueIdData& id);

// The same on the calling thread, counting what it moved into `traffic` (may be null).
void serveRendezvous(Socket listener, const UniqueIdData& id, BootstrapTraffic* traffic);

}  // namespace loom
