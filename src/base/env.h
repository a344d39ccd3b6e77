// Environment variables of other software (HOME, XDG_CACHE_HOME, UCX_*). Loom's own (LOOM_*) are read
// through base/settings.h only. Read on every call: values are cheap to read and tests change them.
#pragma once

#include <string>

namespace loom {

std::string envString(const char* name, const std::string& fallback);

}  // namespace loom
