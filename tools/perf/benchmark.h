// One rank's side of a loom-perf run: every (type, op, root, size) test, timed and then checked.
#pragma once

#include <cstdint>

#include "loom.h"
#include "options.h"

namespace loomperf {

// Runs all tests on `comm` (global rank `rank` of `nranks`); rank 0 prints the report. Returns the
// number of wrong elements summed over all ranks and tests, the same on every rank. Throws
// LoomError when a Loom call fails and std::runtime_error on unusable options (root out of range).
int64_t runBenchmark(const Options& options, loomComm_t comm, int rank, int nranks);

}  // namespace loomperf
