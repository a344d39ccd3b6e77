#include "core/api_result.h"

#include <mutex>
#include <string>

#include "base/log.h"
#include "core/communicator.h"

namespace loom {

namespace {
thread_local std::string tlsLastError;
}

void setThreadLastError(const std::string& message) { tlsLastError = message; }
const char* threadLastError() { return tlsLastError.c_str(); }

loomResult_t finishCall(loomComm_t comm, const Status& status) {
  if (status.ok()) return loomSuccess;
  LOOM_WARN(Init, "{}: {}", loomGetErrorString(status.code()), status.message());
  setThreadLastError(status.message());
  if (comm) {
    std::lock_guard<std::mutex> lock(comm->errorMutex);
    comm->lastError = status.message();
  }
  return status.code();
}

}  // namespace loom
