// One provider instance's UCX state: a UCP context (tag matching, wake-ups) and its worker, shared
// by the comms (they hold it until they are gone). UCX reads its own environment: UCX_TLS and
// UCX_NET_DEVICES are respected as set; when UCX_NET_DEVICES is not set and the transport was given
// a device spec, the interfaces it names are pinned (UCX would otherwise pick any, loopback included).
//
// Beware on one machine: UCX 1.13 reaches ranks in other network namespaces of the same kernel
// through shared memory unless UCX_TLS leaves it out (its shared-memory transports compare boot and
// IPC namespace ids, not network namespaces); the multi-host tests pin UCX_TLS=tcp and the device.
#pragma once

#include <ucp/api/ucp.h>

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "transport/connection.h"

namespace loom::net::ucx {

class UcxWorker {
 public:
  // `netDevices` "" leaves UCX's own choice.
  static Status create(const std::string& netDevices, std::shared_ptr<UcxWorker>* out);
  ~UcxWorker();
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  ucp_worker_h worker() const { return worker_; }
  const std::vector<char>& address() const { return address_; }
  // Runs UCX's progress until it has nothing more to do right now.
  void progress();
  // Before a thread sleeps: the worker's event descriptor armed, or no sleep when events are pending.
  void addWaits(WaitList* waits);

 private:
  UcxWorker() = default;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::vector<char> address_;
  int eventFd_ = -1;
};

Status ucxError(const char* call, ucs_status_t status);

// Whether this host's UCX sees a network transport other than TCP (InfiniBand, RoCE, ...).
bool ucxReachesRdma();

}  // namespace loom::net::ucx
