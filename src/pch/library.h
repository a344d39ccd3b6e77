// The library's precompiled header (meson's cpp_pch on libloom): the standard headers most of its
// sources include, and fmt, which its logging brings into nearly all of them. Parsed once per build
// instead of once per source, which is a quarter to a third of a source's compile time. Every source
// still includes what it uses (scripts/cross-aarch64.sh builds without precompiled headers and so
// holds them to it); nothing of Loom's own belongs here.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>
