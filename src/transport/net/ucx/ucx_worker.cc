#include "transport/net/ucx/ucx_worker.h"

#include <poll.h>
#include <uct/api/uct.h>

#include <cstring>
#include <mutex>

namespace loom::net::ucx {

namespace {
constexpr int64_t kDeferredWorkNapUs = 1000;
}  // namespace

Status ucxError(const char* call, ucs_status_t status) {
  return errorStatus(status == UCS_ERR_CONNECTION_RESET || status == UCS_ERR_ENDPOINT_TIMEOUT ||
                             status == UCS_ERR_UNREACHABLE || status == UCS_ERR_CANCELED
                         ? loomRemoteError
                         : loomSystemError,
                     "ucx: {} failed: {}", call, ucs_status_string(status));
}

Status UcxWorker::create(const std::string& netDevices, std::shared_ptr<UcxWorker>* out) {
  // One at a time in a process: UCX's context and worker setup queries its interfaces into memory it
  // shares between contexts (ThreadSanitizer saw two communicators' inits race in it).
  static std::mutex setupMutex;
  std::lock_guard<std::mutex> lock(setupMutex);
  std::shared_ptr<UcxWorker> w(new UcxWorker());
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) return ucxError("ucp_config_read", st);
  if (!netDevices.empty()) st = ucp_config_modify(config, "NET_DEVICES", netDevices.c_str());
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  if (st == UCS_OK) st = ucp_init(&params, config, &w->context_);
  ucp_config_release(config);
  if (st != UCS_OK) return ucxError("ucp_init", st);
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;  // one driving thread at a time, not always the same one
  st = ucp_worker_create(w->context_, &wp, &w->worker_);
  if (st != UCS_OK) return ucxError("ucp_worker_create", st);
  ucp_address_t* address = nullptr;
  size_t length = 0;
  st = ucp_worker_get_address(w->worker_, &address, &length);
  if (st != UCS_OK) return ucxError("ucp_worker_get_address", st);
  w->address_.assign(reinterpret_cast<char*>(address), reinterpret_cast<char*>(address) + length);
  ucp_worker_release_address(w->worker_, address);
  st = ucp_worker_get_efd(w->worker_, &w->eventFd_);
  if (st != UCS_OK) return ucxError("ucp_worker_get_efd", st);
  *out = std::move(w);
  return Status::Ok();
}

UcxWorker::~UcxWorker() {
  if (worker_) ucp_worker_destroy(worker_);
  if (context_) ucp_cleanup(context_);
}

void UcxWorker::progress() {
  while (ucp_worker_progress(worker_) != 0) {
  }
}

void UcxWorker::addWaits(WaitList* waits) {
  progress();
  const ucs_status_t st = ucp_worker_arm(worker_);
  if (st != UCS_OK) {
    waits->capSleep(0);  // UCS_ERR_BUSY: events came in; progress again before sleeping
    return;
  }
  waits->add(eventFd_, POLLIN);
  // The event fd reports arrivals, not all of UCX's own deferred work (a rendezvous or a send queued
  // behind a full socket moves on in progress callbacks that no event announces). Sleeping until the
  // next arrival, 2 of 10 runs of a 32 MiB allreduce on a loaded machine were still unfinished after
  // 1.5 s (20 ms unloaded); looking again every millisecond, 0 of 25.
  waits->capSleep(kDeferredWorkNapUs);
}

bool ucxReachesRdma() {
  uct_component_h* components = nullptr;
  unsigned ncomponents = 0;
  if (uct_query_components(&components, &ncomponents) != UCS_OK) return false;
  bool found = false;
  for (unsigned c = 0; c < ncomponents && !found; ++c) {
    uct_component_attr_t attr{};
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
    if (uct_component_query(components[c], &attr) != UCS_OK || attr.md_resource_count == 0) continue;
    std::vector<uct_md_resource_desc_t> mds(attr.md_resource_count);
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
    attr.md_resources = mds.data();
    if (uct_component_query(components[c], &attr) != UCS_OK) continue;
    for (const uct_md_resource_desc_t& md : mds) {
      uct_md_config_t* config = nullptr;
      if (uct_md_config_read(components[c], nullptr, nullptr, &config) != UCS_OK) continue;
      uct_md_h handle = nullptr;
      const ucs_status_t opened = uct_md_open(components[c], md.md_name, config, &handle);
      uct_config_release(config);
      if (opened != UCS_OK) continue;
      uct_tl_resource_desc_t* resources = nullptr;
      unsigned nresources = 0;
      if (uct_md_query_tl_resources(handle, &resources, &nresources) == UCS_OK) {
        for (unsigned r = 0; r < nresources; ++r)
          if (resources[r].dev_type == UCT_DEVICE_TYPE_NET && std::strcmp(resources[r].tl_name, "tcp") != 0) found = true;
        uct_release_tl_resource_list(resources);
      }
      uct_md_close(handle);
    }
  }
  uct_release_component_list(components);
  return found;
}

}  // namespace loom::net::ucx
