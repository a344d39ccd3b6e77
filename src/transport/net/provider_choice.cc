#include "transport/net/provider_choice.h"

#include <strings.h>

#include "base/log.h"
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

Status makeSocket(std::unique_ptr<Provider>* out) {
  socket::SocketConfig config;
  LOOM_TRY(socket::readSocketConfig(&config));
  return socket::SocketProvider::create(config, out);
}

Status makeUcx(const ProviderRequest& request, std::unique_ptr<Provider>* out, bool* reachesRdma) {
#ifdef LOOM_HAVE_UCX
  return ucx::UcxProvider::create(request.device, out, reachesRdma);
#else
  (void)request, (void)out, (void)reachesRdma;
  return systemError("this build of Loom has no UCX (libucx-dev was not found when it was configured)");
#endif
}

Status makeIb(const ProviderRequest& request, std::unique_ptr<Provider>* out) {
#ifdef LOOM_HAVE_IBVERBS
  return ib::IbProvider::create(request.device, out);
#else
  (void)request, (void)out;
  return systemError("this build has no ib provider (built without libibverbs headers)");
#endif
}

// A provider that starts but offers no device is as good as none.
Status requireDevices(const std::unique_ptr<Provider>& provider) {
  if (provider->deviceCount() > 0) return Status::Ok();
  return systemError("network provider '{}' has no device", provider->name());
}

}  // namespace

Status makeProvider(const ProviderRequest& request, std::unique_ptr<Provider>* out, std::vector<std::string>* passedOver) {
  auto passOver = [passedOver](const char* provider, const std::string& why) {
    if (passedOver) passedOver->push_back(std::string(provider) + ": " + why);
  };
  const std::string& name = request.name;
  if (!name.empty()) {
    Status st;
    if (strcasecmp(name.c_str(), "socket") == 0) {
      st = makeSocket(out);
    } else if (strcasecmp(name.c_str(), "ib") == 0) {
      st = makeIb(request, out);
    } else if (strcasecmp(name.c_str(), "ucx") == 0) {
      bool rdma = false;
      st = makeUcx(request, out, &rdma);
    } else {
      st = plugin::makePluginProvider(name, out);
    }
    if (st.ok()) st = requireDevices(*out);
    return st.withContext("LOOM_NET=" + name);
  }

  // The best available, each failure logged.
  Status st = plugin::makePluginProvider("", out);
  if (st.ok() && (st = requireDevices(*out)).ok()) return Status::Ok();
  if (st.code() != loomInvalidArgument)  // "no plugin configured or found" needs no warning
    LOOM_WARN(Net, "no external net plugin: {}; trying the next provider", st.message());
  passOver("plugin", st.message());
#ifdef LOOM_HAVE_IBVERBS
  std::unique_ptr<Provider> ib;
  st = makeIb(request, &ib);
  if (st.ok() && (st = requireDevices(ib)).ok()) {
    *out = std::move(ib);
    return Status::Ok();
  }
  if (st.code() == loomInvalidArgument)  // a LOOM_IB_* setting is wrong: worth more than a note
    LOOM_WARN(Net, "ib not used: {}", st.message());
  else
    LOOM_INFO(Net, "ib not used: {}", st.message());
  passOver("ib", st.message());
#else
  passOver("ib", "this build has no ib provider (built without libibverbs headers)");
#endif
  bool rdma = false;
  std::unique_ptr<Provider> ucx;
  st = makeUcx(request, &ucx, &rdma);
  if (st.ok() && rdma && (st = requireDevices(ucx)).ok()) {
    *out = std::move(ucx);
    return Status::Ok();
  }
  const std::string ucxWhy = st.ok() ? "it reaches no RDMA transport here (TCP is the socket provider's)" : st.message();
  LOOM_INFO(Net, "ucx not used: {}", ucxWhy);
  passOver("ucx", ucxWhy);
  return makeSocket(out);
}

}  // namespace loom::net
