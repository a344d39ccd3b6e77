// Host API of the plan kernel (plan_kernel.cu): runs encoded plans (device/plan_encoder.h) on the GPU, one
// thread block per lane, ordered on a stream. No CUDA header is needed to include it.
//
// device/kernel_launch.cc launches it for device buffers over the p2p transport's FIFOs.
#pragma once

#include "kernels/cuda/cuda_reduce.h"
#include "kernels/cuda/device_plan_layout.h"
#include "loom.h"

namespace loom::cuda {

// Enqueues the plan sequence (DevicePlanSequence, then its plans) at `args.sequence` (device-readable
// memory), each plan bound by its call in `args` (the kernel's parameter), on `stream` as `blocks`
// blocks (the sequence's `blocks`) and returns at once; every lane then reports into its call's lane
// statuses. `dtype` picks the kernel and must be every encoded plan's (a lane reports
// WrongElementSize otherwise). Every block must run at the same time, since lanes wait on each other
// through the peers and blocks meet between plans: a launch with more blocks than the device can hold
// resident is refused (cudaErrorCooperativeLaunchTooLarge). Returns a cudaError_t value (0: launched;
// kernel failures surface in the lane statuses).
int launchDevicePlanSequence(const DeviceLaunchArgs& args, uint32_t blocks, loomDataType_t dtype, Stream stream);

// How many plan-kernel blocks `device` holds resident at once (SMs x blocks per SM, for the kernel of
// the most demanding dtype), into *blocks. Returns a cudaError_t value.
int planKernelCapacity(int device, uint32_t* blocks);

// Loads every plan kernel (one per dtype) on the current device now rather than at its first launch:
// lazy loading may synchronize the context then, while a peer's plan kernel in this process waits.
// Returns a cudaError_t value.
int loadPlanKernels();

// Threads per lane (block).
inline constexpr unsigned kPlanThreads = 512;

}  // namespace loom::cuda
