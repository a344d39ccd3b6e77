// The network providers, one table: each one's LOOM_NET word, whether this build has it (data, from
// the build, never an #ifdef outside provider_table.cc), what it is, and how it is made. LOOM_NET's
// words, the default choice's order (provider_choice.h), the build's provider list (core/build_info.h)
// and loom-info's come from here; provider_table.cc is the one place that compiles a provider's code
// in or not.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "base/log.h"
#include "base/status.h"
#include "base/tools_api.h"
#include "transport/net/provider.h"

namespace loom::net {

struct ProviderRequest {
  std::string name;    // LOOM_NET ("" for the best available)
  std::string device;  // the device spec the transport will use (UCX pins UCX_NET_DEVICES from it)
};

// What a factory made: the provider, and why the default choice would pass over it although it
// started (ucx without an RDMA transport: TCP is the socket provider's), "" when it would not.
struct MadeProvider {
  std::unique_ptr<Provider> provider;
  std::string notTheDefault;
};

struct ProviderKind {
  const char* name;  // LOOM_NET's word (any case); the plugin entry's is a stand-in: see anyOtherName
  // Named by any word that is no other entry's: an external NCCL net plugin, by the name it reports.
  bool anyOtherName;
  bool compiledIn;          // this build has it
  const char* description;  // one line (loom-info)
  const char* missing;      // when not compiled in: why, for the error that asks for it
  // Made for `request` (a plugin: request.name is the plugin's name, "" for the configured one). Null
  // when not compiled in.
  Status (*make)(const ProviderRequest& request, MadeProvider* out);
  // How the default choice logs passing it over for `why` (LogLevel::None: not at all).
  LogLevel (*passOverLog)(const Status& why);
};

// Every provider, in the order the default choice tries them; the last is the fallback it takes
// whatever it says of its devices.
LOOM_TOOLS_API std::span<const ProviderKind> providerKinds();
// The entry LOOM_NET=`name` asks for: the one of that word, else the plugin entry.
const ProviderKind& providerKindNamed(std::string_view name);
// LOOM_NET's own words, "socket, ucx, ib" (every entry but the plugin's).
std::string providerWords();

}  // namespace loom::net
