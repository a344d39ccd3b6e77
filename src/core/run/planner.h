// Turns recorded operations into bound plans: picks the algorithm and chunking, builds the plan,
// and points the plan's buffer table at the caller's memory (staging the send buffer when it
// overlaps the output in a way the in-place rules do not allow).
#pragma once

#include <functional>
#include <vector>

#include "algorithms/builders.h"
#include "core/run/executor.h"
#include "core/run/operation.h"

namespace loom {

// Where a plan runs: on host memory (the executor; the planner allocates scratch and staged-send copies
// in host memory), or as a plan kernel on device memory (tuned with the device model; the device layer
// provides scratch and staged sends where the plan runs, sized by Plan::scratchElems and, when
// stageFrom is set, the send bytes).
// DeviceInWindows: a plan kernel whose buffers lie in windows every rank mapped (loomCommWindowRegister,
// rank processes sharing a GPU): tuned with peer-memory plans among the candidates. planCollective
// chooses it for a Device call whose buffers do.
enum class PlanFor { Host, Device, DeviceInWindows };
// `adjust`: when set, may change the tuned request before the plan is built (the device plans choose
// their own channel count, device/device_layer.h); it must decide the same on every rank.
using PlanAdjustment = std::function<Status(Algorithm, PlanRequest*)>;
Status planCollective(loomComm_t comm, const Operation& op, BoundPlan* out, PlanFor target = PlanFor::Host,
                      const PlanAdjustment& adjust = {});
// The tuner's choice for a collective (LOOM_ALGO, LOOM_CHUNK_BYTES and LOOM_NCHANNELS as overrides) as
// the request that builds this rank's plan; *note says why an override was not honoured.
Status chooseTunedPlan(loomComm_t comm, const Operation& op, PlanFor target, Algorithm* algo, PlanRequest* req,
                       std::string* note);

// What the cost model predicts for a collective as chooseTunedPlan would plan it, in microseconds.
Status predictCollective(loomComm_t comm, const Operation& op, PlanFor target, double* us);
// What the machine model predicts for one group's sends and receives on one communicator
// (algorithms/point_to_point_model.h), in microseconds.
double predictPointToPoint(loomComm_t comm, const std::vector<Operation>& ops, PlanFor target);

// All send/recv operations of one group on one communicator, in call order: on the host transports'
// point-to-point channel (PlanFor::Host), or on device FIFO channel 0 (PlanFor::Device).
Status planPointToPoint(loomComm_t comm, const std::vector<Operation>& ops, BoundPlan* out,
                        PlanFor target = PlanFor::Host);

// The operator as the kernels see it (Avg and PreMulSum become a sum plus a post-operation). A
// PreMulSum scalar in device memory is read in `stream`'s order (device/device_layer.h's
// readScalarInStreamOrder).
Status makeReduceOp(loomComm_t comm, int op, loomDataType_t dtype, loomStream_t stream, ReduceOp* out);

}  // namespace loom
