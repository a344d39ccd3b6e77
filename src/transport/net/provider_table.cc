// The table's entries (provider_table.h). Each provider's code is compiled in or not here, and only
// here: the build defines LOOM_HAVE_UCX and LOOM_HAVE_IBVERBS (meson.build) when it has them.
#include "transport/net/provider_table.h"

#include <strings.h>

#include "transport/net/plugin/plugin_provider.h"
#include "transport/net/socket/socket_provider.h"

#ifdef LOOM_HAVE_UCX
#include "transport/net/ucx/ucx_provider.h"
#endif
#ifdef LOOM_HAVE_IBVERBS
#include "transport/net/ib/ib_provider.h"
#endif

namespace loom::net {
namespace {

// ---- which providers this build has: data from here on

#ifdef LOOM_HAVE_UCX
constexpr bool kHaveUcx = true;
Status makeUcx(const ProviderRequest& request, MadeProvider* out) {
  bool reachesRdma = false;
  LOOM_TRY(ucx::UcxProvider::create(request.device, &out->provider, &reachesRdma));
  if (!reachesRdma) out->notTheDefault = "it reaches no RDMA transport here (TCP is the socket provider's)";
  return Status::Ok();
}
#else
constexpr bool kHaveUcx = false;
constexpr Status (*makeUcx)(const ProviderRequest&, MadeProvider*) = nullptr;
#endif

#ifdef LOOM_HAVE_IBVERBS
constexpr bool kHaveIb = true;
Status makeIb(const ProviderRequest& request, MadeProvider* out) {
  return ib::IbProvider::create(request.device, &out->provider);
}
#else
constexpr bool kHaveIb = false;
constexpr Status (*makeIb)(const ProviderRequest&, MadeProvider*) = nullptr;
#endif

Status makeSocket(const ProviderRequest&, MadeProvider* out) {
  socket::SocketConfig config;
  LOOM_TRY(socket::readSocketConfig(&config));
  return socket::SocketProvider::create(config, &out->provider);
}

Status makePlugin(const ProviderRequest& request, MadeProvider* out) {
  return plugin::makePluginProvider(request.name, &out->provider);
}

// "No plugin configured or found" (loomInvalidArgument) is the usual case and needs no note; a plugin
// that is there and fails is worth a warning.
LogLevel pluginPassOver(const Status& why) { return why.code() == loomInvalidArgument ? LogLevel::None : LogLevel::Warn; }
// A wrong LOOM_IB_* setting is worth more than a note; no ACTIVE port or no libibverbs is not.
LogLevel ibPassOver(const Status& why) { return why.code() == loomInvalidArgument ? LogLevel::Warn : LogLevel::Info; }
LogLevel infoPassOver(const Status&) { return LogLevel::Info; }

constexpr ProviderKind kProviders[] = {
    {"plugin", true, true, "an external NCCL net plugin (v8..v12), LOOM_NET naming the name it reports", "",
     makePlugin, pluginPassOver},
    {"ib", false, kHaveIb, "InfiniBand/RoCE verbs, libibverbs loaded at run time",
     "this build has no ib provider (built without libibverbs headers)", makeIb, ibPassOver},
    {"ucx", false, kHaveUcx, "UCX's UCP tag API (the default only where it reaches an RDMA transport)",
     "this build of Loom has no UCX (libucx-dev was not found when it was configured)", makeUcx, infoPassOver},
    {"socket", false, true, "Loom's multi-stream TCP", "", makeSocket, infoPassOver},
};

}  // namespace

std::span<const ProviderKind> providerKinds() { return kProviders; }

const ProviderKind& providerKindNamed(std::string_view name) {
  const ProviderKind* plugin = nullptr;
  for (const ProviderKind& kind : kProviders) {
    if (kind.anyOtherName) {
      plugin = &kind;
      continue;
    }
    const std::string_view word(kind.name);
    if (word.size() == name.size() && strncasecmp(word.data(), name.data(), name.size()) == 0) return kind;
  }
  return *plugin;
}

std::string providerWords() {
  std::string words;
  for (const ProviderKind& kind : kProviders)
    if (!kind.anyOtherName) words += (words.empty() ? "" : ", ") + std::string(kind.name);
  return words;
}

}  // namespace loom::net
