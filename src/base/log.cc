#include "base/log.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <string_view>

#include "base/settings.h"

namespace loom {
namespace {

struct LogSettings {
  LogLevel level = LogLevel::None;
  unsigned subsysMask = ~0u;
};

unsigned subsysBit(std::string_view name) {
  struct Entry {
    const char* name;
    LogSubsys bit;
  };
  static const Entry entries[] = {{"INIT", LogSubsys::Init}, {"COLL", LogSubsys::Coll},
                                  {"P2P", LogSubsys::P2p},   {"NET", LogSubsys::Net},
                                  {"SHM", LogSubsys::Shm},   {"TOPO", LogSubsys::Topo},
                                  {"TUNE", LogSubsys::Tune}, {"BOOT", LogSubsys::Boot},
                                  {"GRAPH", LogSubsys::Graph}};
  if (name == "ALL") return ~0u;
  for (const Entry& e : entries)
    if (strncasecmp(name.data(), e.name, name.size()) == 0 && std::strlen(e.name) == name.size())
      return static_cast<unsigned>(e.bit);
  return 0;
}

LogSettings readSettings() {
  LogSettings s;
  // As text, unchecked: a warning about a bad value would come back here for the log's settings.
  std::string level = settingText(Setting::Debug);
  if (strcasecmp(level.c_str(), "WARN") == 0) s.level = LogLevel::Warn;
  if (strcasecmp(level.c_str(), "INFO") == 0) s.level = LogLevel::Info;
  if (strcasecmp(level.c_str(), "TRACE") == 0) s.level = LogLevel::Trace;
  std::string subsys = settingText(Setting::DebugSubsys);
  if (!subsys.empty()) {
    bool exclude = subsys[0] == '^';
    std::string_view list(subsys);
    if (exclude) list.remove_prefix(1);
    unsigned mask = 0;
    while (!list.empty()) {
      size_t comma = list.find(',');
      const unsigned bit = subsysBit(list.substr(0, comma));
      // Said straight to stderr: the log that would say it is being set up.
      if (bit == 0)
        std::fprintf(stderr, "LOOM WARN ignoring LOOM_DEBUG_SUBSYS=%s: no subsystem named %.*s (%s allows %s)\n",
                     subsys.c_str(), static_cast<int>(list.substr(0, comma).size()), list.data(), "LOOM_DEBUG_SUBSYS",
                     specOf(Setting::DebugSubsys).allowed);
      mask |= bit;
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
    }
    s.subsysMask = exclude ? ~mask : mask;
    // Naming subsystems without a level asks for their INFO lines (LOOM_DEBUG_SUBSYS=graph alone).
    if (level.empty() && !exclude) s.level = LogLevel::Info;
  }
  return s;
}

const LogSettings& settings() {
  static const LogSettings s = readSettings();
  return s;
}

}  // namespace

bool logEnabled(LogLevel level, LogSubsys subsys) {
  const LogSettings& s = settings();
  return level <= s.level && (s.subsysMask & static_cast<unsigned>(subsys)) != 0;
}

void logWrite(LogLevel level, LogSubsys, const std::string& message) {
  static const char* const names[] = {"", "WARN", "INFO", "TRACE"};
  static std::mutex mutex;  // keeps lines from different rank threads whole
  char host[64] = {0};
  gethostname(host, sizeof(host) - 1);
  std::lock_guard<std::mutex> lock(mutex);
  std::fprintf(stderr, "%s:%d LOOM %s %s\n", host, static_cast<int>(getpid()),
               names[static_cast<int>(level)], message.c_str());
}

}  // namespace loom
