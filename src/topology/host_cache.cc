#include "topology/host_cache.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <fstream>
#include <sstream>

#include "base/env.h"
#include "base/settings.h"
#include "base/log.h"
#include "base/process_identity.h"
#include "topology/nccl_xml.h"
#include "topology/topology_file.h"

namespace loom {
namespace {

constexpr int kFormat = 1;  // part of every file name: a new layout never reads an old one

// mkdir -p, quietly.
bool makeDirs(const std::string& path) {
  for (size_t at = 1; at <= path.size(); ++at) {
    if (at != path.size() && path[at] != '/') continue;
    const std::string prefix = path.substr(0, at);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return true;
}

std::string cacheFile(const char* what, const char* suffix) {
  const std::string dir = hostCacheDir();
  if (dir.empty()) return "";
  return fmt::format("{}/{}-v{}-{:016x}.{}", dir, what, kFormat, localHostIdentity().hash(), suffix);
}

std::optional<std::string> readAll(const std::string& path) {
  if (path.empty()) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Written beside and renamed into place, so that processes starting together never read half a file.
void writeAll(const std::string& path, const std::string& text) {
  if (path.empty()) return;
  if (!makeDirs(hostCacheDir())) {
    const int error = errno;
    static std::once_flag warned;
    std::call_once(warned, [&] {
      LOOM_WARN(Topo, "cannot make the cache directory {} ({}): {}; this host's topology and calibration are not kept",
                hostCacheDir(), settingIsSet(Setting::CacheDir) ? "LOOM_CACHE_DIR=" + settingText(Setting::CacheDir) : "the default",
                std::strerror(error));
    });
    return;
  }
  const std::string temporary = fmt::format("{}.{}.tmp", path, getpid());
  {
    std::ofstream out(temporary, std::ios::binary);
    if (!(out << text) || !out.flush()) {
      std::remove(temporary.c_str());
      return;
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) std::remove(temporary.c_str());
}

}  // namespace

std::string hostCacheDir() {
  const std::string configured = settingText(Setting::CacheDir);
  if (configured == "none" || configured == "0") return "";
  if (!configured.empty()) return configured;
  const std::string xdg = envString("XDG_CACHE_HOME", "");
  if (!xdg.empty()) return xdg + "/loom";
  const std::string home = envString("HOME", "");
  return home.empty() ? "" : home + "/.cache/loom";
}

bool readCachedHostGraph(SystemGraph* graph) {
  const std::optional<std::string> xml = readAll(cacheFile("topology", "xml"));
  if (!xml) return false;
  SystemGraph cached;
  if (!parseTopologyXml(*xml, "live", &cached).ok()) return false;
  *graph = std::move(cached);
  return true;
}

void writeCachedHostGraph(const SystemGraph& graph) {
  std::string xml;
  if (writeNcclXml(graph, &xml).ok()) writeAll(cacheFile("topology", "xml"), xml);
}

std::optional<Calibration> readCachedCalibration() {
  const std::string path = cacheFile("calibration", "json");
  if (path.empty() || access(path.c_str(), R_OK) != 0) return std::nullopt;
  Calibration c;
  if (!readCalibrationFile(path, &c).ok()) return std::nullopt;
  return c;
}

void writeCachedCalibration(const Calibration& calibration) {
  const std::string path = cacheFile("calibration", "json");
  if (path.empty() || !makeDirs(hostCacheDir())) return;
  const std::string temporary = fmt::format("{}.{}.tmp", path, getpid());
  if (writeCalibrationFile(temporary, calibration).ok() && std::rename(temporary.c_str(), path.c_str()) == 0) return;
  std::remove(temporary.c_str());
}

}  // namespace loom
