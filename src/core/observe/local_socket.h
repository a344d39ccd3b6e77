// The process's socket for loom-doctor: <dir>/<pid>.sock (core/observe/doctor_protocol.h) in a
// directory of this user alone, so that another user cannot even reach it; one who still connects
// (root excepted) is refused by the peer's credentials, since the answers tell what the job does. The
// file goes when the service stops and when the process exits, but a forked child leaves its parent's
// alone: the parent still serves on it.
#pragma once

#include <string>

#include "base/socket.h"

namespace loom {

class LocalSocket {
 public:
  // Binds in LOOM_DOCTOR_DIR (one that cannot be used is warned about) or else the default directory.
  // Without a socket loom-doctor cannot reach this process, which is logged, not an error of the
  // communicator.
  void open();
  // The listener to poll; -1 while there is none.
  int fd() const { return listener_.valid() ? listener_.fd() : -1; }
  // One waiting connection, non-blocking; none when none waits or its peer is another user.
  Socket accept();
  // Closes it and removes the file.
  void close();
  // In a forked child: lets go of the parent's socket without removing its file.
  void abandonInChild();

 private:
  bool bindIn(const std::string& dir, std::string* why);

  Socket listener_;
  std::string path_;
};

}  // namespace loom
