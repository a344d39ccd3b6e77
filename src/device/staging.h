// Device buffers in collectives (issue 8): when an operation's send or receive buffer is CUDA device
// memory, it runs over pinned host copies: the device input is copied to pinned memory on the
// operation's stream, the ordinary host plans run over the pinned buffers, and the output is copied
// back to the device on the same stream. Host buffers are used as they are; without CUDA (or without
// a usable driver/GPU) this is exactly the host path.
//
// Two ways to wait, chosen per call:
// - Stream-ordered (NCCL's semantics): the call returns once the copies are enqueued. The
//   communicator's progress thread starts the host plans when a CUDA event says the input copy is
//   done; the stream waits at a gate (kernels/cuda/stream_gate.h) that the progress thread opens
//   when the plans ended, and the copy back follows it. Errors surface through
//   loomCommGetAsyncError and the next call. Used when the stream is a created stream (not the legacy
//   default stream) and no other rank of the communicator lives in this process: ranks that are
//   threads of one process share one device, and there a call that synchronizes the device
//   (cudaMalloc, cudaFree, a legacy-stream copy) in one rank's thread would wait for another rank's
//   gate, which waits for the first rank: a deadlock no rank can break. LOOM_DEVICE_ASYNC=0 turns it off.
// - Synchronous, otherwise: copy in, synchronize, run the plans, copy back, synchronize, return.
//
// Either way every byte crosses PCIe twice per rank. This is the fallback: where every pair of ranks
// can reach each other's GPU memory, device_plans.h runs device buffers as plan kernels instead.
#pragma once

#include <vector>

#include "base/status.h"
#include "core/operation.h"

namespace loom {

using HostRunner = Status (*)(const std::vector<Operation>&);

// A communicator's stream-ordered device operations still in flight (their pinned buffers, events
// and gates), kept until their streams are past them. Declared here so that loomComm can own one;
// only the CUDA build makes them.
class DeviceStreamState {
 public:
  virtual ~DeviceStreamState() = default;  // waits for the streams to pass every gate
};

#ifdef LOOM_HAVE_CUDA

// Runs `ops` (one group, possibly several communicators) through runHost, staging device buffers.
Status runWithDeviceStaging(const std::vector<Operation>& ops, HostRunner runHost);

// A PreMulSum scalar created with loomScalarDevice may live in device memory: when *scalar does, its
// element is copied into `storage` (8 bytes) and *scalar points there. Host scalars are unchanged.
// The copy is ordered on `stream` (the operation's) and waited for, so that the value is the one the
// work enqueued before the call leaves there, as NCCL's kernels read it at run time; that costs the
// call a wait for its stream.
Status readScalarToHost(const void** scalar, loomDataType_t dtype, void* storage, loomStream_t stream);

// Whether device buffers can be served here: a CUDA build that found a driver and a device.
bool deviceMemoryUsable();

// loomCommInitAll's device list (for src/core/api_comm.cc, which does not call it yet): Ok when
// CUDA is usable and every entry names a visible device, else the error to return.
Status checkDeviceList(int ndev, const int* devlist);

#else

inline bool deviceMemoryUsable() { return false; }
inline Status checkDeviceList(int, const int*) {
  return invalidArgument("loomCommInitAll: device lists need a CUDA build with a GPU; pass NULL for host ranks");
}
inline Status runWithDeviceStaging(const std::vector<Operation>& ops, HostRunner runHost) { return runHost(ops); }
inline Status readScalarToHost(const void**, loomDataType_t, void*, loomStream_t) { return Status::Ok(); }

#endif

}  // namespace loom
