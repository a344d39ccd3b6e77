// An external NCCL net plugin as a Loom network provider. Its comms have nothing to poll: a thread
// waiting on them naps briefly (kPluginNapUs) and tests again, as NCCL's proxy thread does.
#pragma once

#include <memory>
#include <string>

#include "transport/net/plugin/plugin_loader.h"
#include "transport/net/provider.h"

namespace loom::net::plugin {

inline constexpr int64_t kPluginNapUs = 50;

// `name` "": the first configured plugin that initialises with devices (loomInvalidArgument when none
// is configured or found). Otherwise the configured plugin reporting that name (case-insensitive), else
// the library libnccl-net-<name>.so.
Status makePluginProvider(const std::string& name, std::unique_ptr<Provider>* out);

// A provider over one loaded plugin (initialised here; v11+ plugins get a context of their own).
Status makeProviderFrom(LoadedPlugin* plugin, std::unique_ptr<Provider>* out);

}  // namespace loom::net::plugin
