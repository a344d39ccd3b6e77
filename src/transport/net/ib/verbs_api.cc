#include "transport/net/ib/verbs_api.h"

#include <dlfcn.h>

#include "base/settings.h"

namespace loom::net::ib {

namespace {

constexpr const char* kDefaultLibrary = "libibverbs.so.1";

// dlvsym, converted to the function pointer type of `slot`. Versions as libibverbs exports them.
template <typename Fn>
Status bind(void* library, const VerbsApi& api, const char* name, const char* version, Fn* slot, bool optional = false) {
  dlerror();
  void* symbol = dlvsym(library, name, version);
  if (!symbol) {
    if (optional) return Status::Ok();
    const char* why = dlerror();
    return systemError("{} has no {}@{} ({}): not a libibverbs this provider can use", api.path, name, version,
                       why ? why : "no such symbol");
  }
  *slot = reinterpret_cast<Fn>(symbol);
  return Status::Ok();
}

}  // namespace

Status loadVerbs(std::shared_ptr<const VerbsApi>* out) {
  auto api = std::make_shared<VerbsApi>();
  api->path = settingText(Setting::IbverbsLib);
  // Never closed (see the header); RTLD_LOCAL keeps its names out of the way of anything else loaded.
  void* library = dlopen(api->path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char* why = dlerror();
    return systemError("cannot load {} ({}): install libibverbs (Debian: libibverbs1 and ibverbs-providers), or "
                       "point LOOM_IBVERBS_LIB at it",
                       api->path, why ? why : "unknown reason");
  }
  const char* v11 = "IBVERBS_1.1";
  LOOM_TRY(bind(library, *api, "ibv_get_device_list", v11, &api->getDeviceList));
  LOOM_TRY(bind(library, *api, "ibv_free_device_list", v11, &api->freeDeviceList));
  LOOM_TRY(bind(library, *api, "ibv_get_device_name", v11, &api->getDeviceName));
  LOOM_TRY(bind(library, *api, "ibv_open_device", v11, &api->openDevice));
  LOOM_TRY(bind(library, *api, "ibv_close_device", v11, &api->closeDevice));
  LOOM_TRY(bind(library, *api, "ibv_query_device", v11, &api->queryDevice));
  LOOM_TRY(bind(library, *api, "ibv_query_port", v11, &api->queryPort));
  LOOM_TRY(bind(library, *api, "ibv_query_gid", v11, &api->queryGid));
  LOOM_TRY(bind(library, *api, "_ibv_query_gid_ex", "IBVERBS_1.11", &api->queryGidEx, /*optional=*/true));
  LOOM_TRY(bind(library, *api, "ibv_alloc_pd", v11, &api->allocPd));
  LOOM_TRY(bind(library, *api, "ibv_dealloc_pd", v11, &api->deallocPd));
  LOOM_TRY(bind(library, *api, "ibv_reg_mr", v11, &api->regMr));
  LOOM_TRY(bind(library, *api, "ibv_dereg_mr", v11, &api->deregMr));
  LOOM_TRY(bind(library, *api, "ibv_reg_dmabuf_mr", "IBVERBS_1.12", &api->regDmabufMr, /*optional=*/true));
  LOOM_TRY(bind(library, *api, "ibv_create_comp_channel", "IBVERBS_1.0", &api->createCompChannel));
  LOOM_TRY(bind(library, *api, "ibv_destroy_comp_channel", "IBVERBS_1.0", &api->destroyCompChannel));
  LOOM_TRY(bind(library, *api, "ibv_create_cq", v11, &api->createCq));
  LOOM_TRY(bind(library, *api, "ibv_destroy_cq", v11, &api->destroyCq));
  LOOM_TRY(bind(library, *api, "ibv_get_cq_event", v11, &api->getCqEvent));
  LOOM_TRY(bind(library, *api, "ibv_ack_cq_events", v11, &api->ackCqEvents));
  LOOM_TRY(bind(library, *api, "ibv_create_qp", v11, &api->createQp));
  LOOM_TRY(bind(library, *api, "ibv_modify_qp", v11, &api->modifyQp));
  LOOM_TRY(bind(library, *api, "ibv_destroy_qp", v11, &api->destroyQp));
  LOOM_TRY(bind(library, *api, "ibv_wc_status_str", v11, &api->wcStatusStr));
  *out = std::move(api);
  return Status::Ok();
}

}  // namespace loom::net::ib
