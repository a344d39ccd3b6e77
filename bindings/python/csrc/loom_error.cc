#include "loom_error.h"

#include <c10/util/Exception.h>

namespace loomtorch {

std::exception_ptr loomError(loomResult_t result, const std::string& what, const std::string& detail) {
  // A timeout says "Timed out", as Gloo's do: scripts and tests (torch's own) recognise a timeout by it.
  std::string msg = "Loom " + what + " failed: " +
                    (result == loomTimeout ? std::string("Timed out without progress") : loomGetErrorString(result));
  if (!detail.empty()) msg += ": " + detail;
  c10::SourceLocation where{__func__, __FILE__, static_cast<uint32_t>(__LINE__)};
  if (result == loomInvalidArgument || result == loomInvalidUsage)
    return std::make_exception_ptr(c10::Error(where, msg));
  return std::make_exception_ptr(c10::DistBackendError(where, msg));
}

void checkCall(loomResult_t result, const char* what) {
  if (result == loomSuccess) return;
  throwError(loomError(result, what, loomGetLastError(nullptr)));
}

std::exception_ptr commError(loomResult_t result, const std::string& what, loomComm_t comm) {
  return loomError(result, what, comm ? loomGetLastError(comm) : "");
}

void throwError(std::exception_ptr error) { std::rethrow_exception(error); }

}  // namespace loomtorch
