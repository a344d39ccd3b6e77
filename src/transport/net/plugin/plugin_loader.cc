#include "transport/net/plugin/plugin_loader.h"

#include <dlfcn.h>

#include <map>
#include <mutex>

#include "base/settings.h"
#include "base/log.h"

namespace loom::net::plugin {

namespace {

constexpr int kNewestVersion = 12;
constexpr int kOldestVersion = 8;

struct Registry {
  std::mutex mutex;
  std::map<std::string, std::unique_ptr<LoadedPlugin>> opened;  // by entry
  std::map<std::string, std::string> failed;                     // entry -> why
};

Registry& registry() {
  static Registry r;
  return r;
}

bool looksLikeLibraryName(const std::string& entry) {
  return entry.rfind("lib", 0) == 0 && entry.size() > 3 && entry.compare(entry.size() - 3, 3, ".so") == 0;
}

// Opens `entry` (and its libnccl-net-<entry>.so form); the result or why not.
Status openUncached(const std::string& entry, std::unique_ptr<LoadedPlugin>* out) {
  std::string tried = entry;
  void* library = dlopen(entry.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::string why = library ? "" : dlerror();
  if (!library && entry.find('/') == std::string::npos && !looksLikeLibraryName(entry)) {
    const std::string alternative = "libnccl-net-" + entry + ".so";
    library = dlopen(alternative.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library)
      tried = alternative;
    else
      why += "; " + std::string(dlerror());
  }
  if (!library) return systemError("cannot load net plugin '{}': {}", entry, why);
  for (int v = kNewestVersion; v >= kOldestVersion; --v) {
    const std::string symbol = "ncclNetPlugin_v" + std::to_string(v);
    if (const void* table = dlsym(library, symbol.c_str())) {
      auto plugin = std::make_unique<LoadedPlugin>();
      plugin->file = tried;
      plugin->version = v;
      plugin->calls = adaptPlugin(v, table);
      LOOM_INFO(Net, "net plugin {}: {} ('{}')", tried, symbol, plugin->calls->name());
      *out = std::move(plugin);
      return Status::Ok();
    }
  }
  dlclose(library);
  return systemError("net plugin '{}' ({}) exports none of ncclNetPlugin_v{}..v{} (made for another NCCL version?)",
                     entry, tried, kOldestVersion, kNewestVersion);
}

Status openLocked(Registry& r, const std::string& entry, LoadedPlugin** out) {
  if (auto it = r.opened.find(entry); it != r.opened.end()) {
    *out = it->second.get();
    return Status::Ok();
  }
  if (auto it = r.failed.find(entry); it != r.failed.end()) return Status(loomSystemError, it->second);
  std::unique_ptr<LoadedPlugin> plugin;
  Status st = openUncached(entry, &plugin);
  if (!st.ok()) {
    r.failed[entry] = st.message();
    return st;
  }
  *out = plugin.get();
  r.opened[entry] = std::move(plugin);
  return Status::Ok();
}

}  // namespace

Status openPlugin(const std::string& entry, LoadedPlugin** out) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return openLocked(r, entry, out);
}

std::vector<LoadedPlugin*> configuredPlugins(std::string* failures) {
  failures->clear();
  std::string spec = settingText(Setting::NetPlugin);  // LOOM_NET_PLUGIN, else NCCL_NET_PLUGIN (settings.def)
  const bool named = !spec.empty();
  if (!named) spec = "libnccl-net.so";
  std::vector<LoadedPlugin*> plugins;
  if (spec == "none") return plugins;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = spec.find(',', start);
    const std::string entry = spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!entry.empty()) {
      LoadedPlugin* plugin = nullptr;
      Status st = openLocked(r, entry, &plugin);
      if (st.ok())
        plugins.push_back(plugin);
      else if (named)  // the default name missing is the common case, not a failure
        *failures += (failures->empty() ? "" : "; ") + st.message();
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return plugins;
}

}  // namespace loom::net::plugin
