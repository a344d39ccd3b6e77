// Collectives, point-to-point, groups and user reduction operators: Loom's own calls, argument for
// argument (Loom's API has NCCL's order, types and in-place rules).
#include <cstddef>

#include "compat/exports.h"
#include "compat/last_error.h"

using namespace loom::compat;

LOOM_NCCL_EXPORT ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                             ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  forgetError();
  return toNccl(loomAllReduce(sendbuff, recvbuff, count, toLoom(datatype), toLoom(op), toLoom(comm), toLoom(stream)));
}
LOOM_NCCL_ALIAS(ncclAllReduce)

LOOM_NCCL_EXPORT ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                          ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  forgetError();
  return toNccl(
      loomReduce(sendbuff, recvbuff, count, toLoom(datatype), toLoom(op), root, toLoom(comm), toLoom(stream)));
}
LOOM_NCCL_ALIAS(ncclReduce)

LOOM_NCCL_EXPORT ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                             ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  forgetError();
  return toNccl(loomBroadcast(sendbuff, recvbuff, count, toLoom(datatype), root, toLoom(comm), toLoom(stream)));
}
LOOM_NCCL_ALIAS(ncclBroadcast)

// The in-place broadcast of NCCL's first API.
LOOM_NCCL_EXPORT ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                                         cudaStream_t stream) {
  return pncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}
LOOM_NCCL_ALIAS(ncclBcast)

LOOM_NCCL_EXPORT ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                                 ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                                 cudaStream_t stream) {
  forgetError();
  return toNccl(
      loomReduceScatter(sendbuff, recvbuff, recvcount, toLoom(datatype), toLoom(op), toLoom(comm), toLoom(stream)));
}
LOOM_NCCL_ALIAS(ncclReduceScatter)

LOOM_NCCL_EXPORT ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                             ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  forgetError();
  return toNccl(loomAllGather(sendbuff, recvbuff, sendcount, toLoom(datatype), toLoom(comm), toLoom(stream)));
}
LOOM_NCCL_ALIAS(ncclAllGather)

LOOM_NCCL_EXPORT ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                            ncclComm_t comm, cudaStream_t stream) {
  forgetError();
  return toNccl(loomAlltoAll(sendbuff, recvbuff, count, toLoom(datatype), toLoom(comm), toLoom(stream)));
}
LOOM_NCCL_ALIAS(ncclAlltoAll)

LOOM_NCCL_EXPORT ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                          int root, ncclComm_t comm, cudaStream_t stream) {
  forgetError();
  return toNccl(loomGather(sendbuff, recvbuff, count, toLoom(datatype), root, toLoom(comm), toLoom(stream)));
}
LOOM_NCCL_ALIAS(ncclGather)

LOOM_NCCL_EXPORT ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                           int root, ncclComm_t comm, cudaStream_t stream) {
  forgetError();
  return toNccl(loomScatter(sendbuff, recvbuff, count, toLoom(datatype), root, toLoom(comm), toLoom(stream)));
}
LOOM_NCCL_ALIAS(ncclScatter)

LOOM_NCCL_EXPORT ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                                        ncclComm_t comm, cudaStream_t stream) {
  forgetError();
  return toNccl(loomSend(sendbuff, count, toLoom(datatype), peer, toLoom(comm), toLoom(stream)));
}
LOOM_NCCL_ALIAS(ncclSend)

LOOM_NCCL_EXPORT ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                                        cudaStream_t stream) {
  forgetError();
  return toNccl(loomRecv(recvbuff, count, toLoom(datatype), peer, toLoom(comm), toLoom(stream)));
}
LOOM_NCCL_ALIAS(ncclRecv)

LOOM_NCCL_EXPORT ncclResult_t pncclGroupStart() {
  forgetError();
  return toNccl(loomGroupStart());
}
LOOM_NCCL_ALIAS(ncclGroupStart)

LOOM_NCCL_EXPORT ncclResult_t pncclGroupEnd() {
  forgetError();
  return toNccl(loomGroupEnd());
}
LOOM_NCCL_ALIAS(ncclGroupEnd)

// Answered by Loom's cost model (loomGroupSimulateEnd); the group ends and nothing runs, as in NCCL.
// ncclSimInfo_t is read by its header, as NCCL reads it: a caller's struct may be older or newer.
LOOM_NCCL_EXPORT ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  forgetError();
  constexpr size_t kNeeded = offsetof(ncclSimInfo_t, estimatedTime) + sizeof(float);
  if (!simInfo) return fail(ncclInvalidArgument, "ncclGroupSimulateEnd: simInfo is NULL");
  if (simInfo->magic != kNcclSimInfoMagic || simInfo->size < kNeeded)
    return fail(ncclInvalidArgument,
                "ncclGroupSimulateEnd: simInfo was not set up with NCCL_SIM_INFO_INITIALIZER (its size or magic "
                "is wrong); the group is still open");
  double us = 0;
  const ncclResult_t result = toNccl(loomGroupSimulateEnd(&us));
  if (result == ncclSuccess) simInfo->estimatedTime = static_cast<float>(us);
  return result;
}
LOOM_NCCL_ALIAS(ncclGroupSimulateEnd)

LOOM_NCCL_EXPORT ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                                        ncclScalarResidence_t residence, ncclComm_t comm) {
  forgetError();
  static_assert(sizeof(loomRedOp_t) == sizeof(ncclRedOp_t));
  return toNccl(loomRedOpCreatePreMulSum(reinterpret_cast<loomRedOp_t*>(op), scalar, toLoom(datatype),
                                         static_cast<loomScalarResidence_t>(residence), toLoom(comm)));
}
LOOM_NCCL_ALIAS(ncclRedOpCreatePreMulSum)

LOOM_NCCL_EXPORT ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  forgetError();
  return toNccl(loomRedOpDestroy(toLoom(op), toLoom(comm)));
}
LOOM_NCCL_ALIAS(ncclRedOpDestroy)
