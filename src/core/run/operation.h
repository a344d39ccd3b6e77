// One call of the API (a collective or a send/recv), as recorded until its group runs.
#pragma once

#include <cstddef>
#include <memory>

#include "algorithms/plan.h"
#include "base/status.h"
#include "device/operation_gate.h"
#include "loom.h"

namespace loom {

struct Operation {
  Collective coll = Collective::AllReduce;
  bool isSend = false;  // SendRecv only
  loomComm_t comm = nullptr;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  loomDataType_t dtype = loomFloat32;
  int op = loomSum;
  int root = 0;  // root for rooted collectives, peer for send/recv (kAnyPeer: loomRecvAny)
  int* anySource = nullptr;  // loomRecvAny: where the sender's rank goes
  loomStream_t stream = nullptr;
  // Set for an operation whose device buffers are staged asynchronously on its stream: it runs on
  // the communicator's progress thread once the gate is ready (device/staging.h).
  std::shared_ptr<device::OperationGate> gate;
};

// Checks everything about the call that can be checked locally, before any data moves:
// loomInvalidArgument with a message naming the argument.
Status validateOperation(const Operation& op);

// Byte sizes of the send and recv buffers this rank uses (0 when it does not use one).
void bufferBytes(const Operation& op, size_t* sendBytes, size_t* recvBytes);

const char* operationName(const Operation& op);

}  // namespace loom
