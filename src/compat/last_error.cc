#include "compat/last_error.h"

#include <optional>

namespace loom::compat {
namespace {
thread_local std::optional<std::string> lastError;
}  // namespace

ncclResult_t fail(ncclResult_t code, std::string message) {
  lastError = std::move(message);
  return code;
}

void forgetError() { lastError.reset(); }

const char* dropInError() { return lastError ? lastError->c_str() : nullptr; }

}  // namespace loom::compat
