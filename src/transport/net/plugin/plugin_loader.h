// Finds and opens external NCCL net plugins the way NCCL does:
//   - LOOM_NET_PLUGIN, else NCCL_NET_PLUGIN: a comma-separated list; "none" disables plugins. Each entry
//     is opened as given (a file name or a path); when that fails and it has no '/' and is not already
//     lib*.so, libnccl-net-<entry>.so is tried.
//   - neither set: libnccl-net.so, if the dynamic loader finds one.
// In each library the newest table Loom knows is taken: ncclNetPlugin_v12, then v11, ... v8.
// Libraries stay loaded for the life of the process (a plugin may have started threads; NCCL never
// unloads them either), and are opened once: the registry below is process-wide for that reason.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "transport/net/plugin/plugin_calls.h"

namespace loom::net::plugin {

struct LoadedPlugin {
  std::string file;  // the name that opened it
  int version = 0;   // of the ncclNetPlugin_vN table used
  std::unique_ptr<PluginCalls> calls;
};

// The plugins the environment names (or libnccl-net.so), in order. Entries that cannot be opened are
// described in *failures ("" when every entry opened, or none was asked for).
std::vector<LoadedPlugin*> configuredPlugins(std::string* failures);

// Opens one library by an entry as in the list above (cached like the others).
Status openPlugin(const std::string& entry, LoadedPlugin** out);

}  // namespace loom::net::plugin
