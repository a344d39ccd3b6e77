// Device buffers in collectives (issue 8, first version): when an operation's send or receive buffer
// is CUDA device memory, it runs over pinned host copies. For each operation of a group: copy the
// device input to pinned memory on the operation's stream, synchronize, run the ordinary host plans
// over the pinned buffers, copy the pinned output back to the device on the same stream, and
// synchronize again before returning. Host buffers are used as they are; without CUDA (or without
// a usable driver/GPU) this is exactly the host path.
//
// Limits of this version, in order of what comes next:
// - The call blocks until the operation is complete (NCCL returns at once and the work is ordered on
//   the stream). Next: return at once; the progress thread waits on a CUDA event recorded after the
//   copy-in, runs the plan, enqueues the copy-out, and the stream waits on an event (or a host
//   function / stream memory op) that the progress thread signals.
// - Every byte crosses PCIe twice per rank. Next: the CUDA IPC p2p transport and device kernels that
//   run plan steps (src/kernels/cuda/README.md).
// - Nonblocking communicators also block here until their progress thread finished the operation.
#pragma once

#include <vector>

#include "base/status.h"
#include "core/operation.h"

namespace loom {

using HostRunner = Status (*)(const std::vector<Operation>&);

#ifdef LOOM_HAVE_CUDA

// Runs `ops` (one group, possibly several communicators) through runHost, staging device buffers.
Status runWithDeviceStaging(const std::vector<Operation>& ops, HostRunner runHost);

// A PreMulSum scalar created with loomScalarDevice may live in device memory: when *scalar does, its
// element is copied into `storage` (8 bytes) and *scalar points there. Host scalars are unchanged.
Status readScalarToHost(const void** scalar, loomDataType_t dtype, void* storage);

// loomCommInitAll's device list (for src/core/api_comm.cc, which does not call it yet): Ok when
// CUDA is usable and every entry names a visible device, else the error to return.
Status checkDeviceList(int ndev, const int* devlist);

#else

inline Status checkDeviceList(int, const int*) {
  return invalidArgument("loomCommInitAll: device lists need a CUDA build with a GPU; pass NULL for host ranks");
}
inline Status runWithDeviceStaging(const std::vector<Operation>& ops, HostRunner runHost) { return runHost(ops); }
inline Status readScalarToHost(const void**, loomDataType_t, void*) { return Status::Ok(); }

#endif

}  // namespace loom
