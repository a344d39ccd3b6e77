// Rank processes for the core tests that kill or lose ranks (faults_test.cc, elastic_test.cc).
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "../api/unique_id_pipe.h"
#include "loom.h"

// Forks `n` rank processes (LOOM_TRANSPORT=`transport` when given) that init one communicator, the
// unique id made by rank 0's child and passed on (tests/api/unique_id_pipe.h: this process forks and
// must start no thread), and run `body`, which ends the process with _exit.
inline std::vector<pid_t> forkRanks(int n, const char* transport, const std::function<void(int, loomComm_t)>& body) {
  if (transport) setenv("LOOM_TRANSPORT", transport, 1);
  int idPipe[2];
  if (pipe(idPipe) != 0) return {};
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      loomUniqueId id;
      std::string error;
      if (!loomtest::shareUniqueIdFromRankZero(r, n, idPipe, &id, &error)) _exit(12);
      loomComm_t comm;
      if (loomCommInitRank(&comm, n, id, r) != loomSuccess) _exit(10);
      body(r, comm);
      _exit(13);  // body returned
    }
    pids.push_back(pid);
  }
  close(idPipe[0]);
  close(idPipe[1]);
  if (transport) unsetenv("LOOM_TRANSPORT");
  return pids;
}
