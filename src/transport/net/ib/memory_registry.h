// The registration cache of one protection domain (NCCL's reg.cc idea): registrations are page
// aligned and counted, and a range that lies inside one still held reuses it, so registering a
// sub-range of a registered buffer costs a lookup. The last release deregisters: a registration kept
// after its memory was freed would pin pages that a later allocation at the same address no longer
// uses, and data would land there.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "base/status.h"
#include "transport/net/ib/verbs_api.h"

namespace loom::net::ib {

struct Registration {
  uintptr_t start = 0, end = 0;  // page aligned; start == end for the empty registration
  ibv_mr* mr = nullptr;          // null for an empty range
  int references = 0;
  bool gpu = false;              // GPU memory (peermem or dmabuf): receives into it are flushed

  uint32_t lkey() const { return mr ? mr->lkey : 0; }
  uint32_t rkey() const { return mr ? mr->rkey : 0; }
  bool covers(const void* data, size_t bytes) const;
};

class MemoryRegistry {
 public:
  MemoryRegistry(std::shared_ptr<const VerbsApi> api, ibv_pd* pd) : api_(std::move(api)), pd_(pd) {}
  ~MemoryRegistry();
  MemoryRegistry(const MemoryRegistry&) = delete;
  MemoryRegistry& operator=(const MemoryRegistry&) = delete;

  // A registration covering [data, data + bytes), held until release(). An empty range gets a
  // registration without a memory region (nothing is read or written through it). `gpu`: the range
  // is CUDA memory that ibv_reg_mr takes through nvidia-peermem.
  Status acquire(void* data, size_t bytes, Registration** out, bool gpu = false);
  // GPU memory exported as a dmabuf: [data, data + bytes) is bytes [offset, offset + bytes) of `fd`
  // (device/dmabuf_export.h gives both). The registration keeps the device's addresses (the iova), so
  // it is found again by address like any other; the fd may be closed once this returns.
  Status acquireDmabuf(void* data, size_t bytes, int fd, uint64_t offset, Registration** out);
  void release(Registration* registration);
  size_t size() const;  // registrations held (tests)

 private:
  // A held registration of the same kind covering the page-aligned [start, end), referenced once more.
  Registration* reuse(uintptr_t start, uintptr_t end, bool gpu);
  Registration* hold(uintptr_t start, uintptr_t end, ibv_mr* mr, bool gpu);

  std::shared_ptr<const VerbsApi> api_;
  ibv_pd* pd_;
  mutable std::mutex mutex_;  // comms of one device may be driven by different threads
  std::vector<std::unique_ptr<Registration>> held_;
  Registration empty_;
};

// What a failed ibv_reg_mr (or, with `dmabuf`, ibv_reg_dmabuf_mr) means, in words a user can act on
// (errno `err`).
Status registrationError(int err, const void* data, size_t bytes, bool dmabuf = false);

}  // namespace loom::net::ib
