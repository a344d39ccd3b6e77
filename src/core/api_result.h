// The API edge: a Status becomes a loomResult_t, and its message becomes loomGetLastError's text
// (kept per communicator, or per thread when there is no communicator to keep it in).
#pragma once

#include "base/status.h"
#include "loom.h"

namespace loom {

loomResult_t finishCall(loomComm_t comm, const Status& status);
void setThreadLastError(const std::string& message);
const char* threadLastError();

// Runs `body` and converts what escapes it (Status or a C++ exception such as bad_alloc).
template <typename Body>
loomResult_t apiCall(loomComm_t comm, Body&& body) {
  try {
    return finishCall(comm, body());
  } catch (const std::bad_alloc&) {
    return finishCall(comm, Status(loomSystemError, "out of host memory"));
  } catch (const std::exception& e) {
    return finishCall(comm, Status(loomInternalError, e.what()));
  }
}

}  // namespace loom
