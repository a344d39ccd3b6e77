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

// Device memory a communicator's launches need besides the user's buffers (scratch, a staged or
// scaled input): its launches run one after another on the GPU (each waits for the one before,
// plan_kernels.h), so one region serves them all. It grows when a launch needs more, in stream order
// from launchPool (no synchronization), the old region freed on the launch's stream behind the launches
// that used it: after warm-up a launch allocates nothing. Not thread-safe (the communicator's lock).
class LaunchWorkspace {
 public:
  LaunchWorkspace() = default;
  ~LaunchWorkspace();  // the communicator's launches have ended
  LaunchWorkspace(const LaunchWorkspace&) = delete;
  LaunchWorkspace& operator=(const LaunchWorkspace&) = delete;
  // At least `bytes` for a launch about to be enqueued on `stream` (after the communicator's earlier
  // launches), at *base.
  Status reserve(size_t bytes, cudaMemPool_t pool, cudaStream_t stream, char** base);
  // Whether reserve(bytes) is served without an allocation.
  bool holds(size_t bytes) const { return bytes <= bytes_; }

 private:
  char* base_ = nullptr;
  size_t bytes_ = 0;
};

// Device memory of launches captured into CUDA graphs (their encoded plans, scratch, a staged input),
// which every replay reads: allocated from launchPool on a private stream, outside the capture, and
// kept until the communicator goes. A stream-ordered allocation on the capturing stream would instead
// become a graph memory node (cudaMallocFromPoolAsync: "the allocation is owned by the graph instead of
// the memory pool"): memory of CUDA's graph pool, shared by every graph on the device and out of reach
// of launchPool's settings, for which "CUDA may also introduce synchronization between future graph
// launches" (CUDA programming guide, graph memory nodes). Ranks whose captured plan kernels wait for
// each other then deadlock, one rank's graph waiting for another's to end. Freed in stream order on the
// private stream: nothing here synchronizes the device. Not thread-safe (the communicator's lock).
class KeptDeviceMemory {
 public:
  KeptDeviceMemory(int device, cudaMemPool_t pool) : device_(device), pool_(pool) {}
  ~KeptDeviceMemory();
  KeptDeviceMemory(const KeptDeviceMemory&) = delete;
  KeptDeviceMemory& operator=(const KeptDeviceMemory&) = delete;
  // Usable from any stream when it returns (it waits for its private stream only).
  Status allocate(size_t bytes, char** out);
  // The same, holding a copy of `bytes` of pinned host memory at `host`.
  Status upload(const void* host, size_t bytes, char** out);
  // Copies `bytes` of pinned host memory into `to` (memory of this object's), done when it returns.
  Status copy(char* to, const void* host, size_t bytes);

 private:
  int device_;
  cudaMemPool_t pool_;
  cudaStream_t stream_ = nullptr;
  std::vector<void*> blocks_;
};

}  // namespace loom::device
