// Forked rank processes that get their unique id from rank 0's child, through a pipe made before the
// forks: the id's bootstrap root thread then lives in rank 0, and the forking process never starts a
// thread. A fork while another thread holds an allocator lock gives the child a lock nobody releases
// (AddressSanitizer's allocator takes no lock around fork, so under ASan that is a hang).
// Header-only: the API harness and tests/core/faults_test.cc both fork ranks this way.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "loom.h"

namespace loomtest {

// In each child right after fork: rank 0 makes the id and writes it once per other rank; the others
// read it. Closes the child's ends of `idPipe`. On failure returns false with *error set.
inline bool shareUniqueIdFromRankZero(int rank, int nranks, int idPipe[2], loomUniqueId* id, std::string* error) {
  if (rank != 0) {
    close(idPipe[1]);
    size_t got = 0;
    while (got < sizeof *id) {
      ssize_t n = read(idPipe[0], reinterpret_cast<char*>(id) + got, sizeof *id - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        *error = "rank " + std::to_string(rank) + ": no unique id from rank 0 (it failed before sharing one)";
        return false;
      }
      got += static_cast<size_t>(n);
    }
    close(idPipe[0]);
    return true;
  }
  close(idPipe[0]);
  loomResult_t r = loomGetUniqueId(id);
  if (r != loomSuccess) {
    *error = std::string("loomGetUniqueId returned ") + loomGetErrorString(r) + ": " + loomGetLastError(nullptr);
    return false;
  }
  bool ok = true;
  for (int k = 1; k < nranks && ok; ++k)  // whole ids: writes below PIPE_BUF are atomic
    ok = write(idPipe[1], id, sizeof *id) == static_cast<ssize_t>(sizeof *id);
  close(idPipe[1]);
  if (!ok) *error = std::string("rank 0: writing the unique id: ") + strerror(errno);
  return ok;
}

}  // namespace loomtest
