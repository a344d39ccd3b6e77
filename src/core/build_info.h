// What this build of the library holds: its version, how it was compiled, the GPU code its kernels
// carry and the network providers compiled in (loom-info shows them; a bug report should carry them).
// Decided when the build was configured (src/core/meson.build writes core/build_config.h; the providers:
// transport/net/provider_table.h).
#pragma once

#include <string>
#include <vector>

#include "base/tools_api.h"

namespace loom {

struct BuildInfo {
  std::string version;        // "0.1.0"
  std::string buildType;      // meson's: "release", "debug", ...
  std::string compiler;       // "gcc 14.2.0"
  bool cuda = false;          // device buffers and plan kernels
  std::string cudaCompiler;   // nvcc's version ("" without CUDA)
  std::vector<std::string> cudaCode;  // "sm_80" (machine code), "compute_90" (PTX), ...
  // The network providers compiled in, in the default choice's order (transport/net/provider_table.h):
  // "plugin" (NCCL net plugins, loaded at run time), "ib", "ucx", "socket".
  std::vector<std::string> netProviders;
};

LOOM_TOOLS_API const BuildInfo& buildInfo();

}  // namespace loom
