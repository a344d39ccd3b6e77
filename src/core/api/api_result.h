// The API edge: a Status becomes a loomResult_t, and its message becomes loomGetLastError's text
// (kept per communicator, or per thread when there is no communicator to keep it in).
#pragma once

#include "base/status.h"
#include "loom.h"

namespace loom {

loomResult_t finishCall(loomComm_t comm, const Status& status);
void setThreadLastError(const std::string& message);
const char* threadLastError();

// Counts the API calls in flight on a communicator. loomCommAbort may run on another thread while an
// operation is blocked (that is how a stuck operation is released); the operation leaves `busy` and
// then still records its error on the communicator, so abort and destroy must not free it before
// every such call has returned (AddressSanitizer found the use after free in core_faults).
class CommCallGuard {
 public:
  explicit CommCallGuard(loomComm_t comm);
  ~CommCallGuard();
  CommCallGuard(const CommCallGuard&) = delete;
  CommCallGuard& operator=(const CommCallGuard&) = delete;

 private:
  loomComm_t comm_;
};
// Returns once no API call naming `comm` is in flight (the caller holds no guard for it).
void waitForCommCalls(loomComm_t comm);

// Runs `body` and converts what escapes it (Status or a C++ exception such as bad_alloc).
template <typename Body>
loomResult_t apiCall(loomComm_t comm, Body&& body) {
  CommCallGuard guard(comm);
  try {
    return finishCall(comm, body());
  } catch (const std::bad_alloc&) {
    return finishCall(comm, Status(loomSystemError, "out of host memory"));
  } catch (const std::exception& e) {
    return finishCall(comm, Status(loomInternalError, e.what()));
  }
}

}  // namespace loom
