// loom-perf's command line: nccl-tests' flags with their defaults, plus -np, --json and -T.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "collectives.h"
#include "loom.h"
#include "types.h"

namespace loomperf {

// How the time of one size is combined across ranks (-a).
enum class Average { Rank0 = 0, Mean = 1, Min = 2, Max = 3 };

struct Options {
  const Collective* collective = nullptr;
  size_t minBytes = size_t{32} << 20;
  size_t maxBytes = size_t{32} << 20;
  size_t stepBytes = size_t{1} << 20;
  size_t stepFactor = 1;  // > 1: multiply by it instead of adding stepBytes
  int iters = 20;
  int warmupIters = 1;
  int aggIters = 1;
  int checkIters = 1;
  std::vector<loomDataType_t> types = {loomFloat32};
  std::vector<RedOp> ops = {RedOp::Sum};
  int root = 0;
  bool allRoots = false;
  Average average = Average::Mean;
  int blocking = 0;
  int nprocs = 1;    // -np: forked local processes (1: run in this process)
  int nthreads = 1;  // -t: rank threads per process
  int timeoutSec = 0;
  bool cudaDevice = false;  // -G cuda: buffers in CUDA device memory (device_buffers.h)
  // -G N (nccl-tests' --cudagraph), N > 0: device memory too, and each size's timed loop captured into
  // a CUDA graph once, then launched N times.
  int graphLaunches = 0;
  std::string jsonFile;
  bool percentiles = false;  // per-iteration times: p50, p99 and max per size
  std::string commandLine;  // as typed, for the report
};

// Parses argv; prints help or the error and exits on bad input. argv[0]'s basename may name the
// collective (a link named all_reduce_perf), as nccl-tests' binaries do.
Options parseOptions(int argc, char** argv);

// The sizes to test, in bytes, as nccl-tests steps them.
std::vector<size_t> testSizes(const Options& options);

}  // namespace loomperf
