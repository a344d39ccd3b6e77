// Host API of the plan kernel (plan_kernel.cu): runs an encoded plan (device_plan.h) on the GPU, one
// thread block per lane, ordered on a stream. No CUDA header is needed to include it.
//
// Not wired into the library's collectives yet: that needs FIFOs in peer-visible memory, which the
// CUDA-IPC (p2p) transport will provide (README.md, "Next steps").
#pragma once

#include "kernels/cuda/cuda_reduce.h"
#include "kernels/cuda/device_plan_layout.h"
#include "loom.h"

namespace loom::cuda {

// Enqueues the plan whose encoding lies at `encodedPlanOnDevice` (device-readable memory) on `stream`
// and returns at once; every lane then reports into the plan's lane statuses. `dtype` picks the
// kernel and must be the encoded one (a lane reports WrongElementSize otherwise). Every lane of a
// rank must run at the same time, since lanes wait on each other through the peers: a plan with more
// lanes than the device can hold resident is refused (cudaErrorCooperativeLaunchTooLarge).
// Returns a cudaError_t value (0: launched; kernel failures surface on the stream).
int launchDevicePlan(const void* encodedPlanOnDevice, const DevicePlanShape& shape, loomDataType_t dtype,
                     Stream stream);

// Threads per lane (block).
inline constexpr unsigned kPlanThreads = 512;

}  // namespace loom::cuda
