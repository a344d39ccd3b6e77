// ncclMemAlloc/ncclMemFree (Loom's loomMemAlloc: device memory where CUDA is usable) and buffer
// registration. Loom needs no
// registration to run (it registers what it sends through, itself), so a handle records the buffer
// for the caller's bookkeeping and is checked when it comes back: a handle that this communicator
// did not make, or one already deregistered, is an error rather than a crash.
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_set>

#include "compat/exports.h"
#include "compat/last_error.h"

using namespace loom::compat;

namespace {

struct Registration {
  ncclComm_t comm;
  const void* buffer;
  size_t bytes;
};

std::mutex registrationsMutex;
std::unordered_set<const Registration*>& registrations() {
  static auto* live = new std::unordered_set<const Registration*>;  // outlives static destructors
  return *live;
}

}  // namespace

LOOM_NCCL_EXPORT ncclResult_t pncclMemAlloc(void** ptr, size_t size) {
  forgetError();
  return toNccl(loomMemAlloc(ptr, size));
}
LOOM_NCCL_ALIAS(ncclMemAlloc)

LOOM_NCCL_EXPORT ncclResult_t pncclMemFree(void* ptr) {
  forgetError();
  return toNccl(loomMemFree(ptr));
}
LOOM_NCCL_ALIAS(ncclMemFree)

LOOM_NCCL_EXPORT ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  forgetError();
  if (!comm) return fail(ncclInvalidArgument, "ncclCommRegister: comm is NULL");
  if (!handle) return fail(ncclInvalidArgument, "ncclCommRegister: handle is NULL");
  if (!buff || size == 0) return fail(ncclInvalidArgument, "ncclCommRegister: an empty buffer (NULL or size 0)");
  int rank = 0;
  if (loomResult_t r = loomCommUserRank(toLoom(comm), &rank); r != loomSuccess) return toNccl(r);  // a live comm
  auto* registration = new Registration{comm, buff, size};
  std::lock_guard<std::mutex> lock(registrationsMutex);
  registrations().insert(registration);
  *handle = registration;
  return ncclSuccess;
}
LOOM_NCCL_ALIAS(ncclCommRegister)

LOOM_NCCL_EXPORT ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle) {
  forgetError();
  auto* registration = static_cast<const Registration*>(handle);
  std::lock_guard<std::mutex> lock(registrationsMutex);
  auto found = registrations().find(registration);
  if (found == registrations().end())
    return fail(ncclInvalidArgument, "ncclCommDeregister: the handle is not one ncclCommRegister returned (or it "
                                     "was deregistered already)");
  if (registration->comm != comm)
    return fail(ncclInvalidArgument, "ncclCommDeregister: the handle was registered with another communicator");
  registrations().erase(found);
  delete registration;
  return ncclSuccess;
}
LOOM_NCCL_ALIAS(ncclCommDeregister)

// Windows: Loom's own (loomCommWindowRegister), whose handle is NCCL's. NCCL_WIN_COLL_SYMMETRIC asks
// for NCCL's symmetric kernels, which need the same offset into every rank's window; Loom's
// peer-memory plans read each rank's buffers where they are, so both flags mean the same here.
LOOM_NCCL_EXPORT ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                                      int winFlags) {
  forgetError();
  if (!win) return fail(ncclInvalidArgument, "ncclCommWindowRegister: win is NULL");
  *win = nullptr;
  if (winFlags & ~kNcclWinCollSymmetric)
    return fail(ncclInvalidArgument, "ncclCommWindowRegister: unknown flags " + std::to_string(winFlags));
  loomWindow_t window = nullptr;
  const loomResult_t r = loomCommWindowRegister(toLoom(comm), buff, size, &window);
  if (r == loomSuccess) *win = reinterpret_cast<ncclWindow_t>(window);
  return toNccl(r);
}
LOOM_NCCL_ALIAS(ncclCommWindowRegister)

LOOM_NCCL_EXPORT ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  forgetError();
  return toNccl(loomCommWindowDeregister(toLoom(comm), reinterpret_cast<loomWindow_t>(win)));
}
LOOM_NCCL_ALIAS(ncclCommWindowDeregister)

LOOM_NCCL_EXPORT ncclResult_t pncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  forgetError();
  return toNccl(loomWindowGetUserPtr(toLoom(comm), reinterpret_cast<loomWindow_t>(win), outUserPtr));
}
LOOM_NCCL_ALIAS(ncclWinGetUserPtr)
