// Logging controlled by LOOM_DEBUG (WARN|INFO|TRACE) and LOOM_DEBUG_SUBSYS (comma list of
// init,coll,p2p,net,shm,topo,tune,boot,graph; ALL by default; a leading ^ excludes). One line per event on
// stderr, prefixed with host, pid and the caller's context (rank and communicator name).
#pragma once

#include <fmt/format.h>

#include <string>
#include <utility>

namespace loom {

enum class LogLevel { None = 0, Warn = 1, Info = 2, Trace = 3 };
enum class LogSubsys : unsigned {
  Init = 1, Coll = 2, P2p = 4, Net = 8, Shm = 16, Topo = 32, Tune = 64, Boot = 128,
  Graph = 256,  // what a communicator makes of the topology: rings, trees, transports, NICs
};

bool logEnabled(LogLevel level, LogSubsys subsys);
void logWrite(LogLevel level, LogSubsys subsys, const std::string& message);

template <typename... Args>
void logAt(LogLevel level, LogSubsys subsys, fmt::format_string<Args...> format, Args&&... args) {
  if (!logEnabled(level, subsys)) return;
  logWrite(level, subsys, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace loom

#define LOOM_WARN(subsys, ...) ::loom::logAt(::loom::LogLevel::Warn, ::loom::LogSubsys::subsys, __VA_ARGS__)
#define LOOM_INFO(subsys, ...) ::loom::logAt(::loom::LogLevel::Info, ::loom::LogSubsys::subsys, __VA_ARGS__)
#define LOOM_TRACE(subsys, ...) ::loom::logAt(::loom::LogLevel::Trace, ::loom::LogSubsys::subsys, __VA_ARGS__)
