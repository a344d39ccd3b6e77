// Whether this machine has more runnable threads than cores right now: the kernel's count of runnable
// tasks (the fourth field of /proc/loadavg, "running/total"; it counts the caller too) against the
// online CPUs. A few microseconds per call (one pread of an open file), so callers probe it rarely:
// the waits on network connections, once they have lasted a while (core/run/executor.h).
#pragma once

namespace loom {

// False where the count cannot be read (no /proc): a spin then behaves as before.
bool cpusOversubscribed();

}  // namespace loom
