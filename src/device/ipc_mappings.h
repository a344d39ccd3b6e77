// Device memory of other processes mapped into this one through CUDA IPC, shared by every rank of the
// process: the runtime maps a handle once per process (a second open returns the same address and
// counts), so the ranks here share one mapping and its count in one place. The p2p FIFO blocks and the
// communicators' windows (peer_windows.h) are mapped here.
#pragma once

#include <cuda_runtime_api.h>

#include "base/status.h"

namespace loom::device {

// The memory `handle` names, mapped (peer access enabled lazily, as the FIFOs need); counted.
Status openIpcMapping(const cudaIpcMemHandle_t& handle, char** out);
// One user of the mapping at `address` fewer; the last one unmaps it.
void closeIpcMapping(char* address);

}  // namespace loom::device
