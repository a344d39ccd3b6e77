// Whether another process has exited, seen without being its parent: a pidfd (Linux 5.3 and later)
// turns readable the moment the process exits, while kill(pid, 0) still finds a killed process until
// its parent reaps it (a zombie), so it is only the fallback.
#pragma once

namespace loom {

// A pidfd for `pid` (to poll for POLLIN, then close), or -1 where the kernel has none to give.
int openPidfd(int pid);
// Checks without waiting: the pidfd when there is one, else kill(pid, 0).
bool processExited(int pid, int pidfd);

}  // namespace loom
