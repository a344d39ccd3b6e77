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
  // registration without a memory region (nothing is read or written through it).
  Status acquire(void* data, size_t bytes, Registration** out);
  void release(Registration* registration);
  size_t size() const;  // registrations held (tests)

 private:
  std::shared_ptr<const VerbsApi> api_;
  ibv_pd* pd_;
  mutable std::mutex mutex_;  // comms of one device may be driven by different threads
  std::vector<std::unique_ptr<Registration>> held_;
  Registration empty_;
};

// What a failed ibv_reg_mr means, in words a user can act on (errno `err`).
Status registrationError(int err, const void* data, size_t bytes);

}  // namespace loom::net::ib
