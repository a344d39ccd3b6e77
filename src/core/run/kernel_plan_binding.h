// A core operation planned for a plan kernel, handed to the device layer (device/device_layer.h's
// KernelPlan): its buffers, operator and staging, its number in the flight record, and its description
// for a failure's message as a label of plain bytes (device::OperationLabel), so that binding a steady
// call allocates nothing.
#pragma once

#include <cstdint>

#include "core/run/executor.h"
#include "device/device_layer.h"

namespace loom {

// `kp` (reused from call to call: its buffers keep their capacity) for the plan `bound`, operation `seq`.
void bindKernelPlan(const BoundPlan& bound, uint64_t seq, device::KernelPlan* kp);

}  // namespace loom
