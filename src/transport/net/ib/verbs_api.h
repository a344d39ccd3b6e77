// libibverbs, loaded at run time so that a build with the ib provider runs where libibverbs is absent.
// LOOM_IBVERBS_LIB names the file (default libibverbs.so.1; the tier-1 tests point it at Loom's fake,
// tests/net/fake_verbs). Only the library's exported functions are looked up, by their versioned
// names as NCCL does; the data path (ibv_post_send, ibv_post_recv, ibv_poll_cq, ibv_req_notify_cq) is
// static inline in <infiniband/verbs.h> and goes through the context's ops, which the library fills.
//
// The library stays loaded for the rest of the process once opened: libibverbs loads its own driver
// libraries and keeps process-wide state that does not survive being unloaded and loaded again.
#pragma once

#include <infiniband/verbs.h>

#include <memory>
#include <string>

#include "base/status.h"

namespace loom::net::ib {

struct VerbsApi {
  std::string path;  // what was opened (for messages)

  ibv_device** (*getDeviceList)(int* count) = nullptr;
  void (*freeDeviceList)(ibv_device** list) = nullptr;
  const char* (*getDeviceName)(ibv_device* device) = nullptr;
  ibv_context* (*openDevice)(ibv_device* device) = nullptr;
  int (*closeDevice)(ibv_context* context) = nullptr;
  int (*queryDevice)(ibv_context* context, ibv_device_attr* attr) = nullptr;
  // The exported symbol fills the whole ibv_port_attr (the header's inline wrapper takes the same path
  // for providers without an extended query).
  int (*queryPort)(ibv_context* context, uint8_t port, ibv_port_attr* attr) = nullptr;
  int (*queryGid)(ibv_context* context, uint8_t port, int index, ibv_gid* gid) = nullptr;
  // Optional (IBVERBS_1.11): a GID with its type; null in older libraries (then sysfs says the type).
  int (*queryGidEx)(ibv_context* context, uint32_t port, uint32_t index, ibv_gid_entry* entry, uint32_t flags,
                    size_t entrySize) = nullptr;
  ibv_pd* (*allocPd)(ibv_context* context) = nullptr;
  int (*deallocPd)(ibv_pd* pd) = nullptr;
  ibv_mr* (*regMr)(ibv_pd* pd, void* addr, size_t length, int access) = nullptr;
  // Optional (IBVERBS_1.12, rdma-core 34): memory exported by a device as a dmabuf fd (GPU memory);
  // null in older libraries.
  ibv_mr* (*regDmabufMr)(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access) = nullptr;
  int (*deregMr)(ibv_mr* mr) = nullptr;
  ibv_comp_channel* (*createCompChannel)(ibv_context* context) = nullptr;
  int (*destroyCompChannel)(ibv_comp_channel* channel) = nullptr;
  ibv_cq* (*createCq)(ibv_context* context, int cqe, void* cqContext, ibv_comp_channel* channel, int vector) = nullptr;
  int (*destroyCq)(ibv_cq* cq) = nullptr;
  int (*getCqEvent)(ibv_comp_channel* channel, ibv_cq** cq, void** cqContext) = nullptr;
  void (*ackCqEvents)(ibv_cq* cq, unsigned int count) = nullptr;
  ibv_qp* (*createQp)(ibv_pd* pd, ibv_qp_init_attr* attr) = nullptr;
  int (*modifyQp)(ibv_qp* qp, ibv_qp_attr* attr, int mask) = nullptr;
  int (*destroyQp)(ibv_qp* qp) = nullptr;
  const char* (*wcStatusStr)(ibv_wc_status status) = nullptr;
};

// The library named by LOOM_IBVERBS_LIB (default libibverbs.so.1) with every function above; an error
// naming the file and dlerror's words when it cannot be opened or lacks a function.
Status loadVerbs(std::shared_ptr<const VerbsApi>* out);

}  // namespace loom::net::ib
