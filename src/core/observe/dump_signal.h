// The state service's wake pipe, and LOOM_DUMP_SIGNAL, which writes into it. A signal handler may do
// next to nothing (async-signal-safe calls only), so the dump signal's handler writes one byte into
// the pipe that the service thread polls, and that thread gathers and logs the job's reports; other
// threads write another byte, to have the loop look at its registry again.
#pragma once

#include "base/status.h"

namespace loom {

class WakePipe {
 public:
  // Makes the pipe when there is none, and has the dump signal write into it from then on.
  Status open();
  int readFd() const { return fds_[0]; }
  // Has the loop look at the registry again.
  void wake();
  // Empties the pipe; true when the dump signal came since the last time.
  bool drain();
  // In a forked child: the parent's service thread still reads the inherited pipe, so the child lets
  // go of it (the dump signal then writes nowhere until the child's own service opens one).
  void abandonInChild();

 private:
  int fds_[2] = {-1, -1};
};

// Installs the handler of LOOM_DUMP_SIGNAL, once per process; not when it is 0 or the program
// handles that signal itself.
void installDumpSignal();

}  // namespace loom
