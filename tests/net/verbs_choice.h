// Which libibverbs the ib provider's tests load: FakeVerbs (fake_verbs/, its path in
// LOOM_TEST_FAKE_VERBS, set by meson), or the system's library where LOOM_TEST_REAL_VERBS=1 (the
// Soft-RoCE VM). ScopedEnv (tests/api/scoped_env.h) sets a variable for one test and puts the old value back.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

#include "../api/scoped_env.h"

namespace loom::net {

using loomtest::ScopedEnv;

inline std::string fakeVerbsPath() {
  const char* path = std::getenv("LOOM_TEST_FAKE_VERBS");
  return path ? path : "";
}

inline bool realVerbsRequested() {
  const char* v = std::getenv("LOOM_TEST_REAL_VERBS");
  return v && std::string(v) == "1";
}

}  // namespace loom::net
