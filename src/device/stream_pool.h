// Device memory that plan kernels' launches need besides the user's buffers (scratch, a staged or
// scaled copy of the input, the encoded plans), allocated on the launch's stream and freed there
// after it. It comes from a stream-ordered pool of Loom's own, one per GPU, rather than the device's
// default pool, for two reasons:
// - the default pool may satisfy an allocation on one rank's stream with memory another rank freed
//   on its stream by making the first stream wait for the second (cudaMemPoolReuseAllowInternal-
//   Dependencies): with plan kernels that wait for each other, that is a deadlock between ranks;
// - its release threshold of 0 unmaps the memory at every synchronization, so every call maps it
//   again.
// Loom's pool allows neither internal dependencies nor unmapping below kKeptBytes.
// CUDA builds only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

#include "base/status.h"

namespace loom::device {

// Bytes the pool keeps mapped across synchronizations (what one launch of a large operation's
// temporaries takes); beyond that, freed memory goes back to the device at the next synchronization.
inline constexpr size_t kKeptBytes = size_t{256} << 20;

// The pool of `device`, made on first use (process-wide, never destroyed).
Status launchPool(int device, cudaMemPool_t* out);

// Temporaries of one launch: allocated on its stream from launchPool, freed on the same stream when
// this object goes (after the launch was enqueued, or at once when it was given up before anything
// else was enqueued).
class StreamTemporaries {
 public:
  StreamTemporaries(cudaStream_t stream, cudaMemPool_t pool) : stream_(stream), pool_(pool) {}
  ~StreamTemporaries();
  StreamTemporaries(const StreamTemporaries&) = delete;
  StreamTemporaries& operator=(const StreamTemporaries&) = delete;
  Status allocate(size_t bytes, char** out);

 private:
  cudaStream_t stream_;
  cudaMemPool_t pool_;
  std::vector<void*> blocks_;
};

}  // namespace loom::device
