// A failed Loom call, carrying what the library said about it.
#pragma once

#include <stdexcept>
#include <string>

#include "loom.h"

namespace loomperf {

class LoomError : public std::runtime_error {
 public:
  LoomError(const std::string& call, loomResult_t result, loomComm_t comm)
      : std::runtime_error(call + " failed: " + loomGetErrorString(result) + " (" +
                           std::to_string(static_cast<int>(result)) + "): " + loomGetLastError(comm)),
        result_(result) {}
  loomResult_t result() const { return result_; }

 private:
  loomResult_t result_;
};

// Throws LoomError unless `result` is loomSuccess; `comm` may be null (the thread's last error).
inline void check(loomResult_t result, const char* call, loomComm_t comm) {
  if (result != loomSuccess) throw LoomError(call, result, comm);
}

}  // namespace loomperf
