// Communicators: ids, creation from one id or several, split, teardown, and what a communicator says
// about itself.
#include <cstring>
#include <string>

#include "compat/config.h"
#include "compat/exports.h"
#include "compat/last_error.h"
#include "compat/served_version.h"

using namespace loom::compat;

LOOM_NCCL_EXPORT ncclResult_t pncclGetVersion(int* version) {
  if (!version) return fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = kServedNcclVersion;
  return ncclSuccess;
}
LOOM_NCCL_ALIAS(ncclGetVersion)

LOOM_NCCL_EXPORT ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId) {
  forgetError();
  return toNccl(loomGetUniqueId(reinterpret_cast<loomUniqueId*>(uniqueId)));
}
LOOM_NCCL_ALIAS(ncclGetUniqueId)

LOOM_NCCL_EXPORT ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  forgetError();
  return toNccl(loomCommInitRank(reinterpret_cast<loomComm_t*>(comm), nranks, toLoom(commId), rank));
}
LOOM_NCCL_ALIAS(ncclCommInitRank)

LOOM_NCCL_EXPORT ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                                      ncclConfig_t* config) {
  forgetError();
  loomConfig_t read;
  if (ncclResult_t r = readConfig(config, &read); r != ncclSuccess) return r;
  return toNccl(loomCommInitRankConfig(reinterpret_cast<loomComm_t*>(comm), nranks, toLoom(commId), rank, &read));
}
LOOM_NCCL_ALIAS(ncclCommInitRankConfig)

// NCCL spreads its bootstrap over several ids (each made by a different rank) to bound one root's
// load; Loom's rendezvous takes one, and every rank holds the same array, so all use the first.
LOOM_NCCL_EXPORT ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                                        ncclUniqueId* commIds, ncclConfig_t* config) {
  forgetError();
  if (nId < 1 || !commIds)
    return fail(ncclInvalidArgument, "ncclCommInitRankScalable: nId is " + std::to_string(nId) +
                                         (commIds ? "" : " and commIds is NULL") + ": at least one id is needed");
  return pncclCommInitRankConfig(newcomm, nranks, commIds[0], myrank, config);
}
LOOM_NCCL_ALIAS(ncclCommInitRankScalable)

LOOM_NCCL_EXPORT ncclResult_t pncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  forgetError();
  return toNccl(loomCommInitAll(reinterpret_cast<loomComm_t*>(comm), ndev, devlist));
}
LOOM_NCCL_ALIAS(ncclCommInitAll)

LOOM_NCCL_EXPORT ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                             ncclConfig_t* config) {
  forgetError();
  loomConfig_t read;
  if (ncclResult_t r = readConfig(config, &read); r != ncclSuccess) return r;
  return toNccl(loomCommSplit(toLoom(comm), color, key, reinterpret_cast<loomComm_t*>(newcomm),
                              config ? &read : nullptr));
}
LOOM_NCCL_ALIAS(ncclCommSplit)

// Shrink, revoke and grow: Loom's own (loom.h), with NCCL's flags and argument order.
static_assert(kNcclShrinkAbort == LOOM_SHRINK_ABORT);

LOOM_NCCL_EXPORT ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                                              ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  forgetError();
  loomConfig_t read;
  if (ncclResult_t r = readConfig(config, &read); r != ncclSuccess) return r;
  return toNccl(loomCommShrink(toLoom(comm), excludeRanksList, excludeRanksCount, reinterpret_cast<loomComm_t*>(newcomm),
                               config ? &read : nullptr, shrinkFlags));
}
LOOM_NCCL_ALIAS(ncclCommShrink)

LOOM_NCCL_EXPORT ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  forgetError();
  return toNccl(loomCommRevoke(toLoom(comm), revokeFlags));
}
LOOM_NCCL_ALIAS(ncclCommRevoke)

LOOM_NCCL_EXPORT ncclResult_t pncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId) {
  forgetError();
  static_assert(sizeof(ncclUniqueId) == sizeof(loomUniqueId));
  return toNccl(loomCommGetUniqueId(toLoom(comm), reinterpret_cast<loomUniqueId*>(uniqueId)));
}
LOOM_NCCL_ALIAS(ncclCommGetUniqueId)

LOOM_NCCL_EXPORT ncclResult_t pncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                                            ncclComm_t* newcomm, ncclConfig_t* config) {
  forgetError();
  loomConfig_t read;
  if (ncclResult_t r = readConfig(config, &read); r != ncclSuccess) return r;
  return toNccl(loomCommGrow(toLoom(comm), nRanks, reinterpret_cast<const loomUniqueId*>(uniqueId), rank,
                             reinterpret_cast<loomComm_t*>(newcomm), config ? &read : nullptr));
}
LOOM_NCCL_ALIAS(ncclCommGrow)

LOOM_NCCL_EXPORT ncclResult_t pncclCommFinalize(ncclComm_t comm) {
  forgetError();
  return toNccl(loomCommFinalize(toLoom(comm)));
}
LOOM_NCCL_ALIAS(ncclCommFinalize)

LOOM_NCCL_EXPORT ncclResult_t pncclCommDestroy(ncclComm_t comm) {
  forgetError();
  return toNccl(loomCommDestroy(toLoom(comm)));
}
LOOM_NCCL_ALIAS(ncclCommDestroy)

LOOM_NCCL_EXPORT ncclResult_t pncclCommAbort(ncclComm_t comm) {
  forgetError();
  return toNccl(loomCommAbort(toLoom(comm)));
}
LOOM_NCCL_ALIAS(ncclCommAbort)

LOOM_NCCL_EXPORT ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  forgetError();
  static_assert(sizeof(loomResult_t) == sizeof(ncclResult_t));
  return toNccl(loomCommGetAsyncError(toLoom(comm), reinterpret_cast<loomResult_t*>(asyncError)));
}
LOOM_NCCL_ALIAS(ncclCommGetAsyncError)

LOOM_NCCL_EXPORT ncclResult_t pncclCommCount(const ncclComm_t comm, int* count) {
  forgetError();
  return toNccl(loomCommCount(toLoom(comm), count));
}
LOOM_NCCL_ALIAS(ncclCommCount)

LOOM_NCCL_EXPORT ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device) {
  forgetError();
  return toNccl(loomCommCuDevice(toLoom(comm), device));
}
LOOM_NCCL_ALIAS(ncclCommCuDevice)

LOOM_NCCL_EXPORT ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank) {
  forgetError();
  return toNccl(loomCommUserRank(toLoom(comm), rank));
}
LOOM_NCCL_ALIAS(ncclCommUserRank)

LOOM_NCCL_EXPORT const char* pncclGetErrorString(ncclResult_t result) {
  return loomGetErrorString(static_cast<loomResult_t>(result));
}
LOOM_NCCL_ALIAS(ncclGetErrorString)

LOOM_NCCL_EXPORT const char* pncclGetLastError(ncclComm_t comm) {
  if (const char* mine = dropInError()) return mine;
  return loomGetLastError(toLoom(comm));
}
LOOM_NCCL_ALIAS(ncclGetLastError)
