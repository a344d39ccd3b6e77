#include "core/run/operation.h"

#include <limits>

#include "algorithms/plan.h"
#include "base/datatype.h"
#include "core/communicator.h"

namespace loom {

const char* operationName(const Operation& op) {
  if (op.coll == Collective::SendRecv) return op.isSend ? "send" : op.root == kAnyPeer ? "recv (any source)" : "recv";
  return collectiveName(op.coll);
}

namespace {

// Elements of (send, recv) buffers relative to count, on this rank; 0 = buffer unused here.
void bufferMultipliers(const Operation& op, size_t* sendMul, size_t* recvMul) {
  const size_t n = static_cast<size_t>(op.comm->nranks);
  const bool isRoot = op.comm->rank == op.root;
  switch (op.coll) {
    case Collective::AllReduce: *sendMul = 1, *recvMul = 1; break;
    case Collective::Broadcast: *sendMul = isRoot ? 1 : 0, *recvMul = 1; break;
    case Collective::Reduce: *sendMul = 1, *recvMul = isRoot ? 1 : 0; break;
    case Collective::AllGather: *sendMul = 1, *recvMul = n; break;
    case Collective::ReduceScatter: *sendMul = n, *recvMul = 1; break;
    case Collective::AlltoAll: *sendMul = n, *recvMul = n; break;
    case Collective::Gather: *sendMul = 1, *recvMul = isRoot ? n : 0; break;
    case Collective::Scatter: *sendMul = isRoot ? n : 0, *recvMul = 1; break;
    case Collective::SendRecv: *sendMul = op.isSend ? 1 : 0, *recvMul = op.isSend ? 0 : 1; break;
  }
}

}  // namespace

void bufferBytes(const Operation& op, size_t* sendBytes, size_t* recvBytes) {
  size_t sendMul = 0, recvMul = 0;
  bufferMultipliers(op, &sendMul, &recvMul);
  size_t elem = dataTypeSize(op.dtype);
  *sendBytes = op.count * sendMul * elem;
  *recvBytes = op.count * recvMul * elem;
}

Status validateOperation(const Operation& op) {
  const char* name = operationName(op);
  if (op.comm == nullptr) return invalidArgument("{}: comm is NULL", name);
  if (!isValidDataType(op.dtype)) return invalidArgument("{}: unknown datatype {}", name, static_cast<int>(op.dtype));
  loomComm* comm = op.comm;
  if (isReduction(op.coll)) {
    if (op.op < 0) return invalidArgument("{}: unknown reduction operator {}", name, op.op);
    if (op.op >= loomNumOps) {
      size_t slot = static_cast<size_t>(op.op - loomNumOps);
      if (slot >= comm->customOps.size() || !comm->customOps[slot].inUse)
        return invalidArgument("{}: unknown reduction operator {} (not made by loomRedOpCreatePreMulSum on this "
                               "communicator, or destroyed)", name, op.op);
      if (comm->customOps[slot].dtype != op.dtype)
        return invalidArgument("{}: operator {} was made for {} but the call uses {}", name, op.op,
                               dataTypeName(comm->customOps[slot].dtype), dataTypeName(op.dtype));
    }
  }
  if (op.coll == Collective::SendRecv && op.root == kAnyPeer && !op.isSend) {
    if (!op.anySource) return invalidArgument("{}: source is NULL", name);
    // Zero-byte messages are never sent, so nothing would tell which rank it came from.
    if (op.count == 0) return invalidArgument("{}: count is 0 (a message of no bytes has no source)", name);
  } else if (op.coll == Collective::SendRecv) {
    if (op.root < 0 || op.root >= comm->nranks)
      return invalidArgument("{}: peer {} is outside 0..{}", name, op.root, comm->nranks - 1);
  } else if (isRooted(op.coll) && (op.root < 0 || op.root >= comm->nranks)) {
    return invalidArgument("{}: root {} is outside 0..{}", name, op.root, comm->nranks - 1);
  }
  size_t sendMul = 0, recvMul = 0;
  bufferMultipliers(op, &sendMul, &recvMul);
  size_t elem = dataTypeSize(op.dtype), bytes = 0;
  // The largest buffer of ANY rank must be addressable, not only this rank's: otherwise a non-root
  // would plan (and wait) for an operation the root has already refused.
  size_t largest = std::max(sendMul, recvMul);
  if (op.coll == Collective::Gather || op.coll == Collective::Scatter) largest = static_cast<size_t>(comm->nranks);
  if (__builtin_mul_overflow(op.count, largest, &bytes) || __builtin_mul_overflow(bytes, elem, &bytes) ||
      bytes > static_cast<size_t>(std::numeric_limits<ptrdiff_t>::max()))
    return invalidArgument("{}: count {} of {} overflows the addressable byte size", name, op.count,
                           dataTypeName(op.dtype));
  if (op.count > 0) {
    if (sendMul > 0 && op.send == nullptr) return invalidArgument("{}: sendbuff is NULL with count {}", name, op.count);
    if (recvMul > 0 && op.recv == nullptr) return invalidArgument("{}: recvbuff is NULL with count {}", name, op.count);
  }
  return Status::Ok();
}

}  // namespace loom
