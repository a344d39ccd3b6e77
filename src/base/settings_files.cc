#include "base/settings_files.h"

#include <fmt/format.h>

#include <atomic>
#include <mutex>

#include "base/env.h"
#include "base/settings.h"

namespace loom {
namespace {

struct SettingsFilesCache {
  std::mutex mutex;  // held while the files are read
  std::string systemDir = "/etc";
  std::atomic<const std::vector<SettingsFile>*> files{nullptr};  // null until read; never freed
};

// Never destroyed: a setting may be read while the process's statics are torn down.
SettingsFilesCache& settingsFilesCache() {
  static SettingsFilesCache* cache = new SettingsFilesCache;
  return *cache;
}

// $XDG_CONFIG_HOME/loom/loom.conf, else ~/.config/loom/loom.conf; "" when neither place is known. The
// XDG base directory rules ignore a relative XDG_CONFIG_HOME.
std::string userLoomConf() {
  const std::string xdg = envString("XDG_CONFIG_HOME", "");
  if (!xdg.empty() && xdg[0] == '/') return xdg + "/loom/loom.conf";
  const std::string home = envString("HOME", "");
  return home.empty() ? "" : home + "/.config/loom/loom.conf";
}

std::vector<SettingsFile> readSettingsFiles(const std::vector<SettingsFileLocation>& locations) {
  std::vector<SettingsFile> files;
  for (const SettingsFileLocation& location : locations) {
    SettingsFile file;
    file.location = location;
    file.readError = readConfFile(location.path, &file.conf, &file.exists);
    for (const ConfEntry& e : file.conf.entries)
      file.sources.push_back(location.kind == SettingsFileKind::Loom
                                 ? fmt::format("{}:{}", location.path, e.line)
                                 : fmt::format("{}:{} ({})", location.path, e.line, e.name));
    files.push_back(std::move(file));
  }
  return files;
}

}  // namespace

std::vector<SettingsFileLocation> settingsFileLocations(const std::string& systemDir) {
  std::vector<SettingsFileLocation> at;
  // LOOM_CONF_FILE comes from the environment only (settings.cc never looks for it in a file).
  if (const std::string named = settingText(Setting::ConfFile); !named.empty())
    at.push_back({named, SettingsFileKind::Loom, "LOOM_CONF_FILE"});
  else if (const std::string user = userLoomConf(); !user.empty())
    at.push_back({user, SettingsFileKind::Loom, ""});
  at.push_back({systemDir + "/loom.conf", SettingsFileKind::Loom, ""});
  if (const std::string named = envString("NCCL_CONF_FILE", ""); !named.empty())
    at.push_back({named, SettingsFileKind::Nccl, "NCCL_CONF_FILE"});
  else if (const std::string home = envString("HOME", ""); !home.empty())
    at.push_back({home + "/.nccl.conf", SettingsFileKind::Nccl, ""});
  at.push_back({systemDir + "/nccl.conf", SettingsFileKind::Nccl, ""});
  // A file named twice (LOOM_CONF_FILE=/etc/loom.conf) is read once, where it counts most.
  std::vector<SettingsFileLocation> once;
  for (SettingsFileLocation& location : at) {
    bool seen = false;
    for (const SettingsFileLocation& earlier : once) seen = seen || earlier.path == location.path;
    if (!seen) once.push_back(std::move(location));
  }
  return once;
}

const std::vector<SettingsFile>& settingsFiles() {
  SettingsFilesCache& cache = settingsFilesCache();
  if (const auto* files = cache.files.load(std::memory_order_acquire)) return *files;
  std::lock_guard<std::mutex> lock(cache.mutex);
  if (const auto* files = cache.files.load(std::memory_order_acquire)) return *files;
  const auto* files = new std::vector<SettingsFile>(readSettingsFiles(settingsFileLocations(cache.systemDir)));
  cache.files.store(files, std::memory_order_release);
  return *files;
}

void rereadSettingsFiles(const std::string& systemDir) {
  SettingsFilesCache& cache = settingsFilesCache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  cache.systemDir = systemDir;
  cache.files.store(nullptr, std::memory_order_release);  // the files read before stay (settingsFiles)
}

}  // namespace loom
