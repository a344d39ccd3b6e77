#include "core/run/kernel_plan_binding.h"

#include <cstring>
#include <memory>
#include <string>
#include <type_traits>

#include "core/run/operation.h"

namespace loom {

namespace {

// A plan kernel's operation as its failure messages describe it (device::OperationLabel's bytes):
// what describePlan reads of a BoundPlan, without its vectors. The communicator and the plan outlive
// the launch (the launch keeps the plan).
struct KernelOperationLabel {
  std::string (*describe)(const BoundPlan&);
  loomComm_t comm;
  const Plan* plan;
  uint64_t seq;
  size_t count, groupSize;
  loomDataType_t dtype;
  int op, root;
  Collective coll;
  bool isSend;
};
static_assert(sizeof(KernelOperationLabel) <= device::OperationLabel::kBytes);
static_assert(std::is_trivially_copyable_v<KernelOperationLabel>);

std::string formatKernelOperation(const device::OperationLabel& label) {
  KernelOperationLabel l;
  std::memcpy(&l, label.bytes, sizeof l);
  BoundPlan bp;
  bp.describe = l.describe;
  bp.plan = std::shared_ptr<const Plan>(std::shared_ptr<const Plan>(), l.plan);  // not owned: the launch holds it
  bp.seq = l.seq;
  bp.groupSize = l.groupSize;
  bp.call.comm = l.comm;
  bp.call.coll = l.coll;
  bp.call.isSend = l.isSend;
  bp.call.count = l.count;
  bp.call.dtype = l.dtype;
  bp.call.op = l.op;
  bp.call.root = l.root;
  return describePlan(bp);
}

}  // namespace

void bindKernelPlan(const BoundPlan& bound, uint64_t seq, device::KernelPlan* kp) {
  kp->plan = bound.plan;
  kp->buffers.assign(bound.buffers.begin(), bound.buffers.end());
  kp->dtype = bound.dtype;
  kp->elemSize = bound.elemSize;
  kp->op = bound.op;
  kp->stageFrom = bound.stageFrom;
  bufferBytes(bound.call, &kp->sendBytes, &kp->recvBytes);
  kp->stageBytes = kp->stageFrom ? kp->sendBytes : 0;
  kp->stageScales = bound.stageScales;
  kp->stageOp = bound.stageOp;
  kp->seq = seq;
  const KernelOperationLabel l{bound.describe, bound.call.comm, bound.plan.get(), seq, bound.call.count, bound.groupSize,
                               bound.call.dtype, bound.call.op, bound.call.root, bound.call.coll, bound.call.isSend};
  std::memcpy(kp->label.bytes, &l, sizeof l);
  kp->label.format = formatKernelOperation;
}

}  // namespace loom
