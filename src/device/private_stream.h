// Setup work on device memory (zeroing a FIFO block, copying a table) while other ranks of this process
// may have plan kernels running that wait for this rank: on the legacy default stream it would wait
// for those kernels, so it runs on a non-blocking stream of its own and only that stream is waited for.
// CUDA builds only.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>

#include "base/status.h"

namespace loom::device {

// Enqueues `work` on a fresh non-blocking stream and waits for it; `what` names the work in an error.
Status runOnPrivateStream(const std::function<cudaError_t(cudaStream_t)>& work, const char* what);

}  // namespace loom::device
