// Where meson put Loom's socket provider built as NCCL net plugins (tests/net/meson.build).
#pragma once

#include <cstdlib>
#include <string>

namespace loom::net {

inline std::string pluginFile(int version) {
  const char* dir = std::getenv("LOOM_TEST_PLUGIN_DIR");
  return std::string(dir ? dir : ".") + "/libnccl-net-loomsock-v" + std::to_string(version) + ".so";
}

}  // namespace loom::net
