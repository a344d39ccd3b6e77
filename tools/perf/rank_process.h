// One process's ranks: -t threads, each with its own communicator on the shared unique id.
#pragma once

#include <functional>

#include "loom.h"
#include "options.h"

namespace loomperf {

// Process exit statuses, also used by the forking parent.
enum ExitCode : int { kExitOk = 0, kExitWrong = 1, kExitError = 2, kExitTimeout = 3 };

// Runs ranks procRank*t .. procRank*t + t-1 of nprocs*t and returns the process's exit status.
// A failed Loom call ends the whole process at once (its peers would otherwise wait on it), after
// printing loomGetErrorString and loomGetLastError. `afterInit` runs once this process's first
// communicator exists, i.e. once every rank has used the id.
int runRankProcess(const Options& options, int procRank, int nprocs, const loomUniqueId& id,
                   const std::function<void()>& afterInit = {});

}  // namespace loomperf
