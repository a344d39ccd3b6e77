// The test binaries' precompiled header (meson's cpp_pch on the test targets with several sources):
// GoogleTest and the standard headers the tests include most, parsed once per binary instead of once
// per source. Nothing that not every test target has on its include path (fmt: the model's test is a
// client of the public API only).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
