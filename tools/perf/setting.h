// A Loom setting as loom-perf reads it: through the library's settings table (loomParamGetParameter),
// so that loom-perf's own LOOM_PERF_* variables are declared and documented with the library's.
#pragma once

#include <loom.h>

#include <string>

namespace loomperf {

// The setting's value, or its default ("" when unset without one).
inline std::string loomSetting(const char* key) {
  const char* value = nullptr;
  int len = 0;
  if (loomParamGetParameter(key, &value, &len) != loomSuccess || !value) return "";
  return std::string(value, static_cast<size_t>(len));
}

}  // namespace loomperf
