#include "provider_cases.h"

#include <cstdlib>
#include <cstring>
#include <optional>

#include "plugin_files.h"
#include "transport/net/plugin/plugin_provider.h"
#include "transport/net/socket/socket_handshake.h"
#include "transport/net/socket/socket_provider.h"
#ifdef LOOM_HAVE_UCX
#include "transport/net/ucx/ucx_handshake.h"
#include "transport/net/ucx/ucx_provider.h"
#endif
#ifdef LOOM_HAVE_IBVERBS
#include "transport/net/ib/ib_handshake.h"
#include "transport/net/ib/ib_provider.h"
#include "verbs_choice.h"
#endif

namespace loom::net {
namespace {

SocketAddress socketListenAddress(const Handle& h) {
  socket::SocketHandle sh;
  std::memcpy(&sh, h.bytes.data(), sizeof sh);
  return sh.address;
}

}  // namespace

std::vector<ProviderCase> providerCases() {
  std::vector<ProviderCase> cases;
  auto socketWith = [](int nthreads, int nsocks, size_t inlineBytes) {
    return [=](std::unique_ptr<Provider>* out) {
      socket::SocketConfig c;
      c.nthreads = nthreads;
      c.nsocksPerThread = nsocks;
      c.inlineBytes = inlineBytes;
      return socket::SocketProvider::create(c, out);
    };
  };
  cases.push_back({"socket_2threads_x2", socketWith(2, 2, 128), socketListenAddress});
  cases.push_back({"socket_caller_moves_3streams", socketWith(0, 3, 65535), socketListenAddress});
#ifdef LOOM_HAVE_UCX
  cases.push_back({"ucx_tcp",
                   [](std::unique_ptr<Provider>* out) {
                     bool rdma = false;
                     return ucx::UcxProvider::create("lo", out, &rdma);
                   },
                   [](const Handle& h) {
                     ucx::UcxHandle uh;
                     std::memcpy(&uh, h.bytes.data(), sizeof uh);
                     return uh.outOfBand;
                   },
                   "lo",
                   {{"UCX_TLS", "tcp"}}});
#endif
#ifdef LOOM_HAVE_IBVERBS
  auto ibProvider = [](std::unique_ptr<Provider>* out) {
    return ib::IbProvider::create("lo", out);  // the side channel on loopback
  };
  auto ibListenAddress = [](const Handle& h) {
    ib::IbHandle ih;
    std::memcpy(&ih, h.bytes.data(), sizeof ih);
    return ih.sideChannel;
  };
  if (!fakeVerbsPath().empty())
    cases.push_back({"ib_fake_verbs", ibProvider, ibListenAddress, "", {{"LOOM_IBVERBS_LIB", fakeVerbsPath()}}});
  if (realVerbsRequested())
    cases.push_back({"ib_verbs", ibProvider, ibListenAddress, "", {{"LOOM_IBVERBS_LIB", std::nullopt}}});
#endif
  for (int v : {8, 10, 12})
    cases.push_back({"plugin_v" + std::to_string(v),
                     [v](std::unique_ptr<Provider>* out) {
                       plugin::LoadedPlugin* p = nullptr;
                       LOOM_TRY(plugin::openPlugin(pluginFile(v), &p));
                       if (p->version != v) return internalError("loaded v{}, expected v{}", p->version, v);
                       return plugin::makeProviderFrom(p, out);
                     },
                     socketListenAddress});
  return cases;
}

CaseEnvironment::CaseEnvironment(const ProviderCase& pc) {
  for (const auto& [name, value] : pc.environment) {
    const char* old = std::getenv(name.c_str());
    saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    if (value)
      setenv(name.c_str(), value->c_str(), 1);
    else
      unsetenv(name.c_str());
  }
}

CaseEnvironment::~CaseEnvironment() {
  for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
    if (it->second)
      setenv(it->first.c_str(), it->second->c_str(), 1);
    else
      unsetenv(it->first.c_str());
  }
}

}  // namespace loom::net
