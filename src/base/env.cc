#include "base/env.h"

#include <cerrno>
#include <cstdlib>

#include "base/log.h"

namespace loom {

std::string envString(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return (value && *value) ? std::string(value) : fallback;
}

int64_t envInt(const char* name, int64_t fallback) {
  const char* value = std::getenv(name);
  if (!value || !*value) return fallback;
  errno = 0;
  char* end = nullptr;
  long long parsed = std::strtoll(value, &end, 0);
  if (errno != 0 || end == value) {
    LOOM_WARN(Init, "ignoring {}={}: not a number", name, value);
    return fallback;
  }
  switch (*end) {
    case 'k': case 'K': parsed <<= 10; ++end; break;
    case 'm': case 'M': parsed <<= 20; ++end; break;
    case 'g': case 'G': parsed <<= 30; ++end; break;
    default: break;
  }
  if (*end != '\0') {
    LOOM_WARN(Init, "ignoring {}={}: trailing characters", name, value);
    return fallback;
  }
  return parsed;
}

}  // namespace loom
