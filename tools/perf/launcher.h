// Where the ranks come from: -np forked local processes, an MPI launcher's processes, or this
// process alone; each process then runs -t rank threads.
#pragma once

#include "options.h"

namespace loomperf {

// Runs the benchmark in the mode the options and environment ask for; returns the exit status.
int launch(const Options& options);

}  // namespace loomperf
