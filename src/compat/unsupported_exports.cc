// NCCL functions Loom does not serve (yet): each exists, so that programs and libraries linked against
// NCCL 2.30 (torch resolves every NCCL symbol it names when it is imported) load and run, and each
// fails with ncclInvalidUsage and an ncclGetLastError text that says what is not served and why.
// Pointer arguments to NCCL's device-API structs are taken as void pointers: the same ABI.
#include <string>

#include "compat/exports.h"
#include "compat/last_error.h"

using namespace loom::compat;

namespace {

ncclResult_t notServed(const char* function, const char* why) {
  return fail(ncclInvalidUsage, std::string(function) + ": not served by Loom's libnccl.so.2 (" + why + ")");
}

constexpr const char* kWindows = "Loom has no one-sided operations on windows; use send/recv or collectives";
constexpr const char* kDevice = "NCCL's device API (kernels that communicate by themselves) has no Loom equivalent";

}  // namespace

LOOM_NCCL_EXPORT ncclResult_t pncclCommSuspend(ncclComm_t, int) {
  return notServed("ncclCommSuspend", "Loom does not release a communicator's memory while it lives");
}
LOOM_NCCL_ALIAS(ncclCommSuspend)

LOOM_NCCL_EXPORT ncclResult_t pncclCommResume(ncclComm_t) {
  return notServed("ncclCommResume", "Loom does not release a communicator's memory while it lives");
}
LOOM_NCCL_ALIAS(ncclCommResume)

LOOM_NCCL_EXPORT ncclResult_t pncclCommMemStats(ncclComm_t, ncclCommMemStat_t, uint64_t*) {
  return notServed("ncclCommMemStats", "Loom does not count a communicator's GPU memory by these categories");
}
LOOM_NCCL_ALIAS(ncclCommMemStats)

LOOM_NCCL_EXPORT ncclResult_t pncclPutSignal(const void*, size_t, ncclDataType_t, int, ncclWindow_t, size_t, int, int,
                                             unsigned int, ncclComm_t, cudaStream_t) {
  return notServed("ncclPutSignal", kWindows);
}
LOOM_NCCL_ALIAS(ncclPutSignal)

LOOM_NCCL_EXPORT ncclResult_t pncclSignal(int, int, int, unsigned int, ncclComm_t, cudaStream_t) {
  return notServed("ncclSignal", kWindows);
}
LOOM_NCCL_ALIAS(ncclSignal)

LOOM_NCCL_EXPORT ncclResult_t pncclWaitSignal(int, ncclWaitSignalDesc_t*, ncclComm_t, cudaStream_t) {
  return notServed("ncclWaitSignal", kWindows);
}
LOOM_NCCL_ALIAS(ncclWaitSignal)

LOOM_NCCL_EXPORT ncclResult_t pncclCommQueryProperties(ncclComm_t, void*) {
  return notServed("ncclCommQueryProperties", kDevice);
}
LOOM_NCCL_ALIAS(ncclCommQueryProperties)

LOOM_NCCL_EXPORT ncclResult_t pncclDevCommCreate(ncclComm_t, const void*, void*) {
  return notServed("ncclDevCommCreate", kDevice);
}
LOOM_NCCL_ALIAS(ncclDevCommCreate)

LOOM_NCCL_EXPORT ncclResult_t pncclDevCommDestroy(ncclComm_t, const void*) {
  return notServed("ncclDevCommDestroy", kDevice);
}
LOOM_NCCL_ALIAS(ncclDevCommDestroy)

LOOM_NCCL_EXPORT ncclResult_t pncclGetLsaMultimemDevicePointer(ncclWindow_t, size_t, void** outPtr) {
  if (outPtr) *outPtr = nullptr;
  return notServed("ncclGetLsaMultimemDevicePointer", kDevice);
}
LOOM_NCCL_ALIAS(ncclGetLsaMultimemDevicePointer)

LOOM_NCCL_EXPORT ncclResult_t pncclGetLsaDevicePointer(ncclWindow_t, size_t, int, void** outPtr) {
  if (outPtr) *outPtr = nullptr;
  return notServed("ncclGetLsaDevicePointer", kDevice);
}
LOOM_NCCL_ALIAS(ncclGetLsaDevicePointer)

LOOM_NCCL_EXPORT ncclResult_t pncclGetPeerDevicePointer(ncclWindow_t, size_t, int, void** outPtr) {
  if (outPtr) *outPtr = nullptr;
  return notServed("ncclGetPeerDevicePointer", kDevice);
}
LOOM_NCCL_ALIAS(ncclGetPeerDevicePointer)

// Device-API resources (barriers, all-to-all slots, GIN mailboxes) are requirements for
// ncclDevCommCreate, which Loom does not serve.
LOOM_NCCL_EXPORT ncclResult_t pncclLsaBarrierCreateRequirement(ncclTeam_t, int, void*, void*) {
  return notServed("ncclLsaBarrierCreateRequirement", kDevice);
}
LOOM_NCCL_ALIAS(ncclLsaBarrierCreateRequirement)

LOOM_NCCL_EXPORT ncclResult_t pncclGinBarrierCreateRequirement(ncclComm_t, ncclTeam_t, int, void*, void*) {
  return notServed("ncclGinBarrierCreateRequirement", kDevice);
}
LOOM_NCCL_ALIAS(ncclGinBarrierCreateRequirement)

LOOM_NCCL_EXPORT ncclResult_t pncclGinOutboxCreateRequirement(int, int, void*, void*) {
  return notServed("ncclGinOutboxCreateRequirement", kDevice);
}
LOOM_NCCL_ALIAS(ncclGinOutboxCreateRequirement)

LOOM_NCCL_EXPORT ncclResult_t pncclGinInboxA2ACreateRequirement(ncclTeam_t, int, int, void*, void*) {
  return notServed("ncclGinInboxA2ACreateRequirement", kDevice);
}
LOOM_NCCL_ALIAS(ncclGinInboxA2ACreateRequirement)

LOOM_NCCL_EXPORT ncclResult_t pncclLLA2ACreateRequirement(int, int, void*, void*) {
  return notServed("ncclLLA2ACreateRequirement", kDevice);
}
LOOM_NCCL_ALIAS(ncclLLA2ACreateRequirement)

// Slots for an LL all-to-all: 0, there being none to make (ncclGetLastError says why).
LOOM_NCCL_EXPORT int pncclLLA2ACalcSlots(int, int) {
  notServed("ncclLLA2ACalcSlots", kDevice);
  return 0;
}
LOOM_NCCL_ALIAS(ncclLLA2ACalcSlots)

// The multimem handle is a struct passed by value; the out pointer after it is left untouched.
LOOM_NCCL_EXPORT ncclResult_t pncclGetMultimemDevicePointer(ncclWindow_t, size_t) {
  return notServed("ncclGetMultimemDevicePointer", kDevice);
}
LOOM_NCCL_ALIAS(ncclGetMultimemDevicePointer)

// NCCL re-reads NCCL_DEBUG after these (2.28 deprecates them); Loom reads its log settings once.
LOOM_NCCL_EXPORT void pncclResetDebugInit() {
  notServed("ncclResetDebugInit", "Loom reads LOOM_DEBUG (NCCL_DEBUG) once, when it first logs");
}
LOOM_NCCL_ALIAS(ncclResetDebugInit)

LOOM_NCCL_EXPORT void pncclResetDebugInitInternal() {
  notServed("ncclResetDebugInitInternal", "Loom reads LOOM_DEBUG (NCCL_DEBUG) once, when it first logs");
}
LOOM_NCCL_ALIAS(ncclResetDebugInitInternal)
