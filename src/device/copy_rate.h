// The GPU's device-to-device copy rate, which the device tuner's model divides among the ranks sharing
// a GPU (algorithms/machine_model.h, jobMachine). Measured once per process and GPU, at the first
// plan-kernel setup on it, or given by LOOM_GPU_COPY_GBS (loom-gpu-copy-bw measures the same copy).
// The measurement (device_layer.h's gpuCopyRateGbs) uses stream-ordered memory on a stream of its own:
// nothing in it waits for other work on the device (a plan kernel of another communicator may be
// waiting for this very thread). CUDA builds only.
#pragma once

#include "device/device_layer.h"

namespace loom::device {

// LOOM_GPU_COPY_GBS when set (> 0), else gpuCopyRateGbs(device).
double gpuCopyRateSettingOrMeasured(int device);

}  // namespace loom::device
