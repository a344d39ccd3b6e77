// The API tests' cases (tests/api/cases.h: collective, dtype, op, count, in place, root) run on CUDA
// device buffers: inputs are made on the host by the reference model, uploaded, the collective runs
// with device pointers on this rank's stream, and the outputs are downloaded and checked element by
// element against the same model, plus guard bytes around every buffer and unchanged send buffers.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <string>
#include <vector>

#include "../api/cases.h"

namespace loomgpu {

struct DeviceRunOptions {
  bool useNullStream = false;    // pass stream NULL (the legacy default stream) instead of a created one
  bool deviceScalars = false;    // PreMulSum scalars live in device memory (loomScalarDevice)
};

// Runs the cases in order on ctx's communicator with buffers on CUDA device `device`. Returns "" or
// the failures (a failed call aborts the communicator and stops the run, as loomtest::runCases does).
// Each rank allocates its device memory once, for the largest case, and the ranks meet (a host
// allreduce) before the first case: ranks that are threads running plan kernels on one GPU must not
// allocate or free device memory (which may synchronize the device) while a peer's kernel waits for
// a launch of theirs that would come only after it.
std::string runDeviceCases(loomtest::RankContext& ctx, const std::vector<loomtest::Case>& cases, int device,
                           const DeviceRunOptions& options = {});

// A host allreduce of one int over ctx's communicator: the ranks meet (after their device
// allocations, before their first launch). Returns "" or the failure.
std::string meetOnTheHost(loomtest::RankContext& ctx);

// Runs body(ctx, stream) on CUDA device 0 with a non-blocking stream made for it and destroyed after:
// the rank body of most device tests. Returns what body returns.
using StreamBody = std::function<std::string(loomtest::RankContext&, cudaStream_t)>;
std::string withStreamOnGpu0(loomtest::RankContext& ctx, const StreamBody& body);

}  // namespace loomgpu
