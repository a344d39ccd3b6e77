// Which network provider a communicator uses (LOOM_NET):
//   socket        Loom's multi-stream TCP (always there)
//   ucx           UCX's UCP tag API (builds with UCX only)
//   ib            InfiniBand/RoCE verbs, libibverbs loaded at run time (builds with libibverbs'
//                 headers only)
//   <name>        an external NCCL net plugin, by the name it reports (case-insensitive), found as
//                 NCCL finds plugins (plugin/plugin_loader.h); a plugin file libnccl-net-<name>.so is
//                 also tried
//   unset         the best available: an external plugin that loads and has devices, else ib when
//                 libibverbs loads and has an ACTIVE port, else UCX when it reaches an RDMA transport,
//                 else socket; every candidate that fails is logged and the next is tried.
// A provider named explicitly that cannot start is an error (loomInvalidArgument for an unknown name,
// loomSystemError for one that fails), never a silent fallback.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/tools_api.h"
#include "transport/net/provider.h"

namespace loom::net {

struct ProviderRequest {
  std::string name;    // LOOM_NET ("" for the best available)
  std::string device;  // the device spec the transport will use (UCX pins UCX_NET_DEVICES from it)
};

// `passedOver`, when given, receives why each provider tried before the chosen one was not taken
// ("ib: no ACTIVE port"), in the order they were tried (loom-info shows them).
LOOM_TOOLS_API Status makeProvider(const ProviderRequest& request, std::unique_ptr<Provider>* out,
                                   std::vector<std::string>* passedOver = nullptr);

}  // namespace loom::net
