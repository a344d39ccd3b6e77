#include "core/build_info.h"

#include <sstream>

#include "core/build_config.h"
#include "transport/net/provider_table.h"

namespace loom {

const BuildInfo& buildInfo() {
  static const BuildInfo info = [] {
    BuildInfo b;
    b.version = LOOM_BUILD_VERSION;
    b.buildType = LOOM_BUILD_TYPE;
    b.compiler = LOOM_BUILD_COMPILER;
#ifdef LOOM_HAVE_CUDA
    b.cuda = true;
#endif
    b.cudaCompiler = LOOM_BUILD_CUDA_COMPILER;
    std::istringstream code(LOOM_BUILD_CUDA_CODE);
    for (std::string word; code >> word;) b.cudaCode.push_back(word);
    for (const net::ProviderKind& kind : net::providerKinds())
      if (kind.compiledIn) b.netProviders.push_back(kind.name);
    return b;
  }();
  return info;
}

}  // namespace loom
