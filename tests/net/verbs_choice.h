// Which libibverbs the ib provider's tests load: FakeVerbs (fake_verbs/, its path in
// LOOM_TEST_FAKE_VERBS, set by meson), or the system's library where LOOM_TEST_REAL_VERBS=1 (the
// Soft-RoCE VM). ScopedEnv sets a variable for one test and puts the old value back.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace loom::net {

inline std::string fakeVerbsPath() {
  const char* path = std::getenv("LOOM_TEST_FAKE_VERBS");
  return path ? path : "";
}

inline bool realVerbsRequested() {
  const char* v = std::getenv("LOOM_TEST_REAL_VERBS");
  return v && std::string(v) == "1";
}

class ScopedEnv {
 public:
  // `value` nullopt unsets the variable.
  ScopedEnv(const char* name, const std::optional<std::string>& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      setenv(name, value->c_str(), 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace loom::net
