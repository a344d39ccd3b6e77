// Device buffers run by the plan kernel (issue 8): an operation whose buffers are all in GPU memory
// runs as a kernel on the caller's stream that walks this rank's plan steps over the p2p transport's
// FIFOs (transport/p2p_fifos.h), with no copy through host memory and no host thread involved, as in
// NCCL. The host returns once the launch is enqueued.
//
// - Set up lazily, at a communicator's first operation on device buffers, collectively (every rank
//   makes that call): every rank allocates and maps its FIFOs and all ranks agree whether every pair
//   can reach each other's GPU memory. When not (ranks on other hosts, GPUs without peer access,
//   processes sharing one GPU without LOOM_DEVICE_PLANS=1, LOOM_DEVICE_PLANS=0 anywhere), every rank
//   keeps staging device buffers through host memory (device_staging.h).
// - An operation runs here when every buffer it uses on this rank is device memory on the
//   communicator's GPU (PreMulSum: the input is scaled into a temporary on the stream first, and
//   the plan is a sum; core/planner.h says how a device scalar is read). Ranks must agree on the memory
//   kind of each call, as NCCL requires device memory everywhere: a rank whose buffers are host
//   memory while its peers' are on the device runs another transport, and both sides time out.
// - One launch per communicator and run of same-dtype operations of a group: its blocks run the
//   operations' plans one after the other (kernels/cuda/plan_launch.h). Launches of one communicator
//   are ordered after each other whatever streams they are on (the FIFOs are shared), and a group's
//   launch after every stream its operations named (and those streams after it).
// - CUDA graphs: a launch on a stream being captured is captured (its encoded plans, copied to the GPU
//   at every replay, and its lanes' statuses stay in pinned memory for the communicator's lifetime;
//   a failure in any replay is reported like any other). The communicator must have set up its
//   transport before (one operation on device buffers outside the capture), a captured launch follows
//   the communicator's earlier launches of the same capture only, and the application orders replays
//   with the communicator's other work and ends them before destroying it, as NCCL asks.
// - Errors: every lane reports how it ended into pinned host memory; a launch whose lanes failed (a
//   timeout after LOOM_TIMEOUT_MS, a message of the wrong size, an abort) fails the communicator,
//   seen by loomCommGetAsyncError and the next call. loomCommAbort and any other failure of the
//   communicator raise the abort word every waiting lane watches.
#pragma once

#include <memory>
#include <vector>

#include "base/status.h"
#include "core/device_staging.h"
#include "core/operation.h"

struct loomComm;

namespace loom {

// A communicator's device-plan state (its FIFOs, its launches in flight); only the CUDA build makes one.
class DevicePlanState {
 public:
  virtual ~DevicePlanState() = default;  // raises the abort word if the communicator failed, then waits for its launches
  // Stops every lane of this communicator's launches at its next wait (an abort or a failure).
  virtual void raiseAbort() = 0;
};

#ifdef LOOM_HAVE_CUDA

// A communicator's state, made at init (nothing CUDA happens until its first device operation).
std::unique_ptr<DevicePlanState> makeDevicePlanState();

// Runs those of `ops` that can run as plan kernels (above) and hands the others to `next`, in call order;
// refuses the call, before anything is launched, when one of the others is on a stream being captured
// into a CUDA graph (core/stream_capture.h).
Status runWithDevicePlans(const std::vector<Operation>& ops, HostRunner next);

// Looks at the communicator's finished launches: a launch whose lanes failed fails the communicator.
void pollDeviceLaunches(loomComm* comm);

#else

inline std::unique_ptr<DevicePlanState> makeDevicePlanState() { return nullptr; }
inline Status runWithDevicePlans(const std::vector<Operation>& ops, HostRunner next) { return next(ops); }
inline void pollDeviceLaunches(loomComm*) {}

#endif

}  // namespace loom
