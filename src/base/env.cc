#include "base/env.h"

#include <cstdlib>

namespace loom {

std::string envString(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return (value && *value) ? std::string(value) : fallback;
}

}  // namespace loom
