// CUDA graph capture is not supported yet: a collective called on a stream that is capturing is
// refused with loomInvalidUsage before anything is enqueued, so the capture stays valid and the
// caller learns why, instead of a capture invalidated by Loom's cross-stream events and host polling,
// or a graph that replays work whose host side (staging, lane statuses) is long gone.
#pragma once

#include <vector>

#include "base/status.h"
#include "core/operation.h"

namespace loom {

#ifdef LOOM_HAVE_CUDA
// Ok, or loomInvalidUsage naming the first operation whose stream is capturing.
Status refuseCapturingStreams(const std::vector<Operation>& ops);
#else
inline Status refuseCapturingStreams(const std::vector<Operation>&) { return Status::Ok(); }
#endif

}  // namespace loom
