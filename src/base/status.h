// Status: the one error type used inside Loom. Functions that can fail return Status (or take an
// out-parameter and return Status); the API edge turns it into a loomResult_t and records the message
// for loomGetLastError. No exceptions cross module boundaries.
#pragma once

#include <fmt/format.h>

#include <string>
#include <utility>

#include "loom.h"

namespace loom {

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(loomResult_t code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }

  bool ok() const { return code_ == loomSuccess; }
  loomResult_t code() const { return code_; }
  const std::string& message() const { return message_; }

  // Adds context in front of the message, innermost last: "allreduce #12: recv from rank 3: closed".
  Status withContext(const std::string& context) const {
    if (ok()) return *this;
    return Status(code_, context + ": " + message_);
  }

 private:
  loomResult_t code_ = loomSuccess;
  std::string message_;
};

template <typename... Args>
Status errorStatus(loomResult_t code, fmt::format_string<Args...> format, Args&&... args) {
  return Status(code, fmt::format(format, std::forward<Args>(args)...));
}

template <typename... Args>
Status invalidArgument(fmt::format_string<Args...> format, Args&&... args) {
  return Status(loomInvalidArgument, fmt::format(format, std::forward<Args>(args)...));
}

template <typename... Args>
Status systemError(fmt::format_string<Args...> format, Args&&... args) {
  return Status(loomSystemError, fmt::format(format, std::forward<Args>(args)...));
}

template <typename... Args>
Status internalError(fmt::format_string<Args...> format, Args&&... args) {
  return Status(loomInternalError, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace loom

// Returns early from the enclosing function when expr yields a failed Status.
#define LOOM_TRY(expr)                      \
  do {                                      \
    ::loom::Status loom_try_status_ = (expr); \
    if (!loom_try_status_.ok()) return loom_try_status_; \
  } while (0)
