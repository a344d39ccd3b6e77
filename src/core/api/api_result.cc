#include "core/api/api_result.h"

#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include "base/log.h"
#include "core/communicator.h"

namespace loom {

namespace {
thread_local std::string tlsLastError;
}  // namespace

CommCallGuard::CommCallGuard(loomComm_t comm) : comm_(comm) {
  if (comm_) comm_->callsInFlight.fetch_add(1, std::memory_order_acquire);
}

// The decrement is this call's last touch of the communicator: once it reads zero, destroy may free.
CommCallGuard::~CommCallGuard() {
  if (comm_) comm_->callsInFlight.fetch_sub(1, std::memory_order_release);
}

void waitForCommCalls(loomComm_t comm) {
  // Calls still leaving only record their error: a short poll is enough, and keeps the hot path to
  // one atomic per call.
  while (comm->callsInFlight.load(std::memory_order_acquire) != 0)
    std::this_thread::sleep_for(std::chrono::microseconds(50));
}

void setThreadLastError(const std::string& message) { tlsLastError = message; }
const char* threadLastError() { return tlsLastError.c_str(); }

loomResult_t finishCall(loomComm_t comm, const Status& status) {
  if (status.ok()) return loomSuccess;
  if (status.code() == loomInProgress) return loomInProgress;  // not an error: nothing to record
  LOOM_WARN(Init, "{}: {}", loomGetErrorString(status.code()), status.message());
  setThreadLastError(status.message());
  if (comm) {
    std::lock_guard<std::mutex> lock(comm->errorMutex);
    comm->lastError = status.message();
  }
  return status.code();
}

}  // namespace loom
