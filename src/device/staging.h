// Staging of device buffers through pinned host memory (the seam's runStaged), for operations on CUDA
// memory that plan kernels do not run: the device input is copied to pinned memory on the operation's
// stream, the ordinary host plans run over the pinned buffers, and the output is copied back to the
// device on the same stream. Managed memory is used in place (ordered by the stream).
//
// Two ways to wait, chosen per group:
// - Stream-ordered (NCCL's semantics): the call returns once the copies are enqueued. The
//   communicator's progress thread starts the host plans when a CUDA event says the input copy is
//   done; the stream waits at a gate (kernels/cuda/stream_gate.h) that the progress thread opens
//   when the plans ended, and the copy back follows it. Errors surface through
//   loomCommGetAsyncError and the next call. Used when every operation of the group is staged, on a
//   created stream (not the legacy default stream), and no other rank of its communicator lives in
//   this process: ranks that are threads of one process share one device, and there a call that
//   synchronizes the device (cudaMalloc, cudaFree, a legacy-stream copy) in one rank's thread would
//   wait for another rank's gate, which waits for the first rank: a deadlock no rank can break.
//   LOOM_DEVICE_ASYNC=0 turns it off.
// - Synchronous, otherwise: copy in, synchronize, run the plans, copy back, synchronize, return.
//
// Either way every byte crosses PCIe twice per rank. This is the fallback: where every pair of ranks
// can reach each other's GPU memory, plan kernels (plan_kernels.h) run device buffers instead.
// CUDA builds only.
#pragma once

#include <deque>
#include <memory>

#include "device/device_layer.h"
#include "device/host_flags.h"

namespace loom::device {

struct InFlight;  // one stream-ordered operation until its stream passed the copy back (staging.cc)

// A communicator's stream-ordered operations still in flight (their pinned buffers, events and
// gates), kept until their streams are past them. Used under the communicator's `busy` lock.
class StreamStaging {
 public:
  StreamStaging();
  ~StreamStaging();  // waits for the streams to pass every gate (the progress thread opened them all)
  StreamStaging(const StreamStaging&) = delete;
  StreamStaging& operator=(const StreamStaging&) = delete;
  HostFlags& flags() { return flags_; }
  void add(std::unique_ptr<InFlight> f);
  // Frees what the streams are done with, oldest first.
  void retire();

 private:
  HostFlags flags_;
  std::deque<std::unique_ptr<InFlight>> inFlight_;
};

}  // namespace loom::device
