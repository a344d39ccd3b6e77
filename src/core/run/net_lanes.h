// Plan kernels' network lanes as core wires them (device_layer.h's NetLanes): the device layer lays out
// and allocates the FIFOs, the communicator's transport runs the proxy that moves them
// (transport/net/fifo_proxy.h), and the GPUDirect RDMA choice made at init says where the slots live.
#pragma once

#include "core/communicator.h"
#include "device/device_layer.h"

namespace loom {

// Unset `start` when the communicator has no network peers. `comm` outlives what it returns.
device::NetLanes netLanesFor(loomComm* comm);

}  // namespace loom
