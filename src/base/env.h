// Environment parameters (LOOM_*). Read on every call: values are cheap to read and tests change them.
#pragma once

#include <cstdint>
#include <string>

namespace loom {

std::string envString(const char* name, const std::string& fallback);
// Accepts decimal with an optional K/M/G suffix (binary units); falls back on anything unparsable.
int64_t envInt(const char* name, int64_t fallback);

}  // namespace loom
