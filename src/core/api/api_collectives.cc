// C API: collectives, point-to-point and groups. Each call becomes an Operation, validated before
// any data moves, and runs now or at the end of the enclosing group.
#include "algorithms/plan.h"
#include "core/api/api_result.h"
#include "core/run/group.h"

using namespace loom;

namespace {

loomResult_t submit(const Operation& op) {
  return apiCall(op.comm, [&] { return submitOperation(op); });
}

Operation makeOp(Collective coll, const void* send, void* recv, size_t count, loomDataType_t dtype, int redop,
                 int root, loomComm_t comm, loomStream_t stream) {
  Operation op;
  op.coll = coll;
  op.send = send;
  op.recv = recv;
  op.count = count;
  op.dtype = dtype;
  op.op = redop;
  op.root = root;
  op.comm = comm;
  op.stream = stream;
  return op;
}

}  // namespace

extern "C" {

LOOM_API loomResult_t loomAllReduce(const void* sendbuff, void* recvbuff, size_t count, loomDataType_t datatype,
                                    loomRedOp_t op, loomComm_t comm, loomStream_t stream) {
  return submit(makeOp(Collective::AllReduce, sendbuff, recvbuff, count, datatype, op, 0, comm, stream));
}

LOOM_API loomResult_t loomBroadcast(const void* sendbuff, void* recvbuff, size_t count, loomDataType_t datatype,
                                    int root, loomComm_t comm, loomStream_t stream) {
  return submit(makeOp(Collective::Broadcast, sendbuff, recvbuff, count, datatype, loomSum, root, comm, stream));
}

LOOM_API loomResult_t loomReduce(const void* sendbuff, void* recvbuff, size_t count, loomDataType_t datatype,
                                 loomRedOp_t op, int root, loomComm_t comm, loomStream_t stream) {
  return submit(makeOp(Collective::Reduce, sendbuff, recvbuff, count, datatype, op, root, comm, stream));
}

LOOM_API loomResult_t loomAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, loomDataType_t datatype,
                                    loomComm_t comm, loomStream_t stream) {
  return submit(makeOp(Collective::AllGather, sendbuff, recvbuff, sendcount, datatype, loomSum, 0, comm, stream));
}

LOOM_API loomResult_t loomReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                        loomDataType_t datatype, loomRedOp_t op, loomComm_t comm, loomStream_t stream) {
  return submit(makeOp(Collective::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0, comm, stream));
}

LOOM_API loomResult_t loomAlltoAll(const void* sendbuff, void* recvbuff, size_t count, loomDataType_t datatype,
                                   loomComm_t comm, loomStream_t stream) {
  return submit(makeOp(Collective::AlltoAll, sendbuff, recvbuff, count, datatype, loomSum, 0, comm, stream));
}

LOOM_API loomResult_t loomGather(const void* sendbuff, void* recvbuff, size_t count, loomDataType_t datatype, int root,
                                 loomComm_t comm, loomStream_t stream) {
  return submit(makeOp(Collective::Gather, sendbuff, recvbuff, count, datatype, loomSum, root, comm, stream));
}

LOOM_API loomResult_t loomScatter(const void* sendbuff, void* recvbuff, size_t count, loomDataType_t datatype, int root,
                                  loomComm_t comm, loomStream_t stream) {
  return submit(makeOp(Collective::Scatter, sendbuff, recvbuff, count, datatype, loomSum, root, comm, stream));
}

LOOM_API loomResult_t loomSend(const void* sendbuff, size_t count, loomDataType_t datatype, int peer, loomComm_t comm,
                               loomStream_t stream) {
  Operation op = makeOp(Collective::SendRecv, sendbuff, nullptr, count, datatype, loomSum, peer, comm, stream);
  op.isSend = true;
  return submit(op);
}

LOOM_API loomResult_t loomRecv(void* recvbuff, size_t count, loomDataType_t datatype, int peer, loomComm_t comm,
                               loomStream_t stream) {
  return submit(makeOp(Collective::SendRecv, nullptr, recvbuff, count, datatype, loomSum, peer, comm, stream));
}

LOOM_API loomResult_t loomRecvAny(void* recvbuff, size_t count, loomDataType_t datatype, int* source, loomComm_t comm,
                                  loomStream_t stream) {
  Operation op = makeOp(Collective::SendRecv, nullptr, recvbuff, count, datatype, loomSum, kAnyPeer, comm, stream);
  op.anySource = source;
  return submit(op);
}

LOOM_API loomResult_t loomGroupStart(void) { return apiCall(nullptr, [] { return groupStart(); }); }

LOOM_API loomResult_t loomGroupEnd(void) { return apiCall(nullptr, [] { return groupEnd(); }); }

LOOM_API loomResult_t loomGroupSimulateEnd(double* estimatedUs) {
  return apiCall(nullptr, [=] { return groupSimulateEnd(estimatedUs); });
}

}  // extern "C"
