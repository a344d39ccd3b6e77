// Running under an external launcher (mpiexec, mpirun): each process is one rank, and the unique id
// travels through a file, so loom-perf needs no MPI library. Rank 0 writes the file atomically; the
// others poll for it for a bounded time and ignore files older than their own start.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "loom.h"

namespace loomperf {

struct LauncherRank {
  int rank;
  int size;
  const char* launcher;  // which variables said so, for messages
};

// PMI_RANK/PMI_SIZE (MPICH, Intel MPI), OMPI_COMM_WORLD_RANK/SIZE (Open MPI), MV2_COMM_WORLD_*.
std::optional<LauncherRank> detectLauncher();

// LOOM_PERF_ID_FILE, else a name in /tmp derived from the launcher's job id (or, failing that, the
// parent pid, which all ranks started on one host by one launcher share).
std::string idFilePath();

void publishId(const std::string& path, const loomUniqueId& id);
// Waits for a file newer than `notBefore` (minus a margin for clock skew); throws on timeout.
loomUniqueId awaitId(const std::string& path, std::chrono::seconds timeout,
                     std::chrono::system_clock::time_point notBefore);
void withdrawId(const std::string& path);

}  // namespace loomperf
