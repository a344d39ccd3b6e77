#include "core/run/planner.h"

#include <cstring>

#include "algorithms/builders.h"
#include "algorithms/point_to_point_model.h"
#include "algorithms/verifier.h"
#include "base/datatype.h"
#include "base/log.h"
#include "base/thread_scratch.h"
#include "core/communicator.h"
#include "device/device_layer.h"
#include "kernels/cpu/float_convert.h"

namespace loom {

namespace {

Tuner& tunerFor(loomComm_t comm, PlanFor target) {
  switch (target) {
    case PlanFor::Host: return *comm->tuner;
    case PlanFor::Device: return *comm->deviceTuner;
    case PlanFor::DeviceInWindows: return *comm->windowTuner;
  }
  return *comm->tuner;
}

TuneRequest tuneRequestOf(loomComm_t comm, const Operation& op, PlanFor target) {
  TuneRequest t;
  t.coll = op.coll;
  t.count = op.count;
  t.elemSize = dataTypeSize(op.dtype);
  t.root = op.root;
  if (target != PlanFor::Host && comm->device &&
      comm->device->planKernelSetup() == device::PlanKernelSetup::Ready) {
    // A plan kernel's channels and slots are the GPU FIFOs'. (A prediction before the first device
    // operation set them up prices the host transports' instead.)
    const device::DeviceFabric fabric = comm->device->fabric();
    t.slotBytes = fabric.slotBytes;
    t.maxChannels = fabric.maxChannels;
  } else {
    t.slotBytes = comm->transports->slotBytes();
    t.maxChannels = comm->transports->nchannels();
  }
  t.forcedAlgorithm = comm->settings.algorithmRules.forCall(op.coll, callBytes(op.coll, op.count, t.elemSize, comm->nranks));
  t.forcedChunkBytes = comm->settings.forcedChunkBytes;
  t.forcedChannels = comm->settings.forcedChannels;
  return t;
}

}  // namespace

Status chooseTunedPlan(loomComm_t comm, const Operation& op, PlanFor target, Algorithm* algo, PlanRequest* req,
                       std::string* note) {
  Tuner& tuner = tunerFor(comm, target);
  const TuneRequest t = tuneRequestOf(comm, op, target);
  ThreadScratch<TuneChoice> scratch;  // kept from call to call: copying a decision reuses its rings' memory
  if (scratch.get().empty()) scratch.get().emplace_back();
  TuneChoice& choice = scratch.get().front();
  LOOM_TRY(tuner.choosePlan(t, &choice));
  *algo = choice.algorithm;
  tuner.planRequest(t, choice, comm->rank, req);
  *note = std::move(choice.note);
  return Status::Ok();
}

namespace {

// LOOM_VERIFY: 1 proves every new plan with the symbolic verifier before it runs, 0 none; by default
// shapes small enough to prove in a few milliseconds are proven (the verifier runs every
// rank's plan, so its cost grows with count x nranks).
bool shouldVerify(int setting, const PlanRequest& req) {
  constexpr uint64_t kDefaultVerifyElems = 1024;
  if (setting == 0 || req.nranks > 64) return false;
  return setting == 1 || req.count * static_cast<uint64_t>(req.nranks) <= kDefaultVerifyElems;
}

// The scalar may sit at any address (the caller's pointer, or packed in an operation's bytes).
template <typename T>
T loadUnaligned(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

double scalarAsDouble(const void* p, loomDataType_t dtype) {
  switch (dtype) {
    case loomFloat16: return halfToFloat(loadUnaligned<uint16_t>(p));
    case loomBfloat16: return bfloat16ToFloat(loadUnaligned<uint16_t>(p));
    case loomFloat8e4m3: return fp8e4m3ToFloat(loadUnaligned<uint8_t>(p));
    case loomFloat8e5m2: return fp8e5m2ToFloat(loadUnaligned<uint8_t>(p));
    case loomFloat32: return loadUnaligned<float>(p);
    case loomFloat64: return loadUnaligned<double>(p);
    default: return 0;
  }
}

int64_t scalarAsInt(const void* p, loomDataType_t dtype) {
  switch (dtype) {
    case loomInt8: return loadUnaligned<int8_t>(p);
    case loomUint8: return loadUnaligned<uint8_t>(p);
    case loomInt32: return loadUnaligned<int32_t>(p);
    case loomUint32: return loadUnaligned<uint32_t>(p);
    case loomInt64: return loadUnaligned<int64_t>(p);
    case loomUint64: return static_cast<int64_t>(loadUnaligned<uint64_t>(p));
    default: return 0;
  }
}

bool overlaps(const void* a, size_t aBytes, const void* b, size_t bBytes) {
  if (aBytes == 0 || bBytes == 0) return false;
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x < y + bBytes && y < x + aBytes;
}

// NCCL's in-place layouts: the plans are built to be correct for exactly these.
bool isAllowedInPlace(const Operation& op, int rank) {
  const char* send = static_cast<const char*>(op.send);
  const char* recv = static_cast<const char*>(op.recv);
  const size_t block = op.count * dataTypeSize(op.dtype);
  switch (op.coll) {
    case Collective::AllReduce:
    case Collective::Broadcast:
    case Collective::Reduce: return send == recv;
    case Collective::AllGather: return send == recv + static_cast<size_t>(rank) * block;
    case Collective::ReduceScatter: return recv == send + static_cast<size_t>(rank) * block;
    case Collective::Gather: return send == recv + static_cast<size_t>(op.root) * block;
    case Collective::Scatter: return recv == send + static_cast<size_t>(op.root) * block;
    default: return false;
  }
}

// Whether a plan kernel's input and output lie in windows every rank mapped: a communicator with a window
// tuner only (rank processes sharing a GPU), and not when the kernel runs on a copy of the input the
// device layer makes (planCollective's stageFrom: a PreMulSum's scaled copy, or an overlap of input and
// output that NCCL's layouts do not allow), which is in no window.
bool inWindows(loomComm_t comm, const Operation& op) {
  if (!comm->windowTuner || (isReduction(op.coll) && op.op >= loomNumOps)) return false;
  size_t sendBytes = 0, recvBytes = 0;
  bufferBytes(op, &sendBytes, &recvBytes);
  if (overlaps(op.send, sendBytes, op.recv, recvBytes) && !isAllowedInPlace(op, comm->rank)) return false;
  return comm->device->inWindows(op.send, sendBytes, op.recv, recvBytes);
}

std::string describeCollective(const BoundPlan& bp) {
  const Operation& op = bp.call;
  std::string text = fmt::format("{} #{} on {} ({} x {}", operationName(op), bp.seq, op.comm->describe(), op.count,
                                 dataTypeName(op.dtype));
  if (isReduction(op.coll))
    text += fmt::format(", {}", redOpName(op.op));
  if (isRooted(op.coll))
    text += fmt::format(", root {}", op.root);
  text += ")";
  if (bp.plan) text += " via " + bp.plan->algorithm;  // "via ring": which plan ran, in errors and traces
  return text;
}

std::string describeGroup(const BoundPlan& bp) {
  return fmt::format("group of {} send/recv #{} on {}", bp.groupSize, bp.seq, bp.call.comm->describe());
}

}  // namespace

Status makeReduceOp(loomComm_t comm, int op, loomDataType_t dtype, loomStream_t stream, ReduceOp* out) {
  ReduceOp r;
  switch (op) {
    case loomSum: r.kind = ReduceKind::Sum; break;
    case loomProd: r.kind = ReduceKind::Prod; break;
    case loomMax: r.kind = ReduceKind::Max; break;
    case loomMin: r.kind = ReduceKind::Min; break;
    case loomAvg:
      r.kind = ReduceKind::Sum;
      r.post = PostOpKind::Divide;
      r.divisor = static_cast<uint64_t>(comm->nranks);
      break;
    default: {
      const CustomRedOp& custom = comm->customOps[static_cast<size_t>(op - loomNumOps)];
      const void* scalar = custom.residence == loomScalarHostImmediate ? custom.immediate : custom.pointer;
      alignas(8) unsigned char deviceScalar[8];  // a scalar in device memory is copied here
      LOOM_TRY(device::readScalarInStreamOrder(&scalar, dtype, deviceScalar, stream));
      r.kind = ReduceKind::Sum;
      r.post = PostOpKind::Multiply;
      r.scalar = scalarAsDouble(scalar, dtype);
      r.intScalar = scalarAsInt(scalar, dtype);
    }
  }
  *out = r;
  return Status::Ok();
}

Status planCollective(loomComm_t comm, const Operation& op, BoundPlan* out, PlanFor target,
                      const PlanAdjustment& adjust) {
  const bool hostTemporaries = target == PlanFor::Host;
  if (target == PlanFor::Device && inWindows(comm, op)) target = PlanFor::DeviceInWindows;
  Algorithm algo = Algorithm::Ring;
  ThreadScratch<PlanRequest> reqScratch;  // kept from call to call: its rings keep their memory
  if (reqScratch.get().empty()) reqScratch.get().emplace_back();
  PlanRequest& req = reqScratch.get().front();
  std::string note;
  LOOM_TRY(chooseTunedPlan(comm, op, target, &algo, &req, &note));
  if (adjust) LOOM_TRY(adjust(algo, &req));
  out->call = op;
  out->seq = comm->opCount;
  out->describe = describeCollective;
  PlanKey key{req.coll, algo, req.root, req.count, req.elemSize, req.chunkElems, req.nchannels};
  out->plan = comm->planCache.find(key);
  if (!out->plan) {
    auto plan = std::make_shared<Plan>();
    LOOM_TRY(buildPlan(algo, req, plan.get()).withContext(describeCollective(*out)));
    if (shouldVerify(comm->settings.verifyPlans, req)) {
      // Every rank proves the same plans, so every rank refuses together instead of hanging.
      Status proof = verifyAlgorithm(algo, req);
      if (!proof.ok())
        return internalError("{}: the {} plan failed verification and was not run: {}", describeCollective(*out),
                             algorithmName(algo), proof.message());
    }
    if (!note.empty()) LOOM_WARN(Tune, "{}: {}", describeCollective(*out), note);
    LOOM_INFO(Tune, "{}: {} with {} B chunks on {} channel(s)", describeCollective(*out), algorithmName(algo),
              req.chunkElems * req.elemSize, req.nchannels);
    comm->planCache.insert(key, plan);
    out->plan = std::move(plan);
  }
  out->dtype = op.dtype;
  out->elemSize = req.elemSize;
  if (isReduction(op.coll))
    LOOM_TRY(makeReduceOp(comm, op.op, op.dtype, op.stream, &out->op));
  size_t sendBytes = 0, recvBytes = 0;
  bufferBytes(op, &sendBytes, &recvBytes);
  char* send = const_cast<char*>(static_cast<const char*>(op.send));
  if (out->op.post == PostOpKind::Multiply) {
    // PreMulSum: every rank scales its own input by its own scalar (ranks may pass different ones),
    // so the plan's input is a scaled copy and the plan itself is a plain sum.
    out->stageScales = true;
    out->stageOp = out->op;
    out->op.post = PostOpKind::None;
  }
  if (out->stageScales || (overlaps(op.send, sendBytes, op.recv, recvBytes) && !isAllowedInPlace(op, comm->rank))) {
    out->stageFrom = send;
    if (hostTemporaries) out->stagedSend.resize(sendBytes);
    send = hostTemporaries ? out->stagedSend.data() : nullptr;
  }
  if (hostTemporaries) out->scratch.resize(out->plan->scratchElems * out->elemSize);
  out->buffers = {send, static_cast<char*>(op.recv), out->scratch.data()};
  // A large output apart from the input is cold memory: copies into it skip the cache (in place, the
  // output lines were just read as input and are cached already; streaming them out was measured slower).
  out->streamOutput = recvBytes >= kStreamOutputBytes && !overlaps(send, sendBytes, op.recv, recvBytes);
  return Status::Ok();
}

Status predictCollective(loomComm_t comm, const Operation& op, PlanFor target, double* us) {
  Tuner& tuner = tunerFor(comm, target);
  const TuneRequest t = tuneRequestOf(comm, op, target);
  TuneChoice choice;
  LOOM_TRY(tuner.choosePlan(t, &choice));
  return tuner.predict(t, choice, us);
}

double predictPointToPoint(loomComm_t comm, const std::vector<Operation>& ops, PlanFor target) {
  std::vector<P2pOp> p2p;
  for (const Operation& op : ops)
    if (const uint64_t bytes = op.count * dataTypeSize(op.dtype); bytes > 0)
      p2p.push_back(P2pOp{op.isSend, op.anySource ? kAnyPeer : op.root, bytes});
  return predictPointToPointUs(tunerFor(comm, target).machine(), comm->rank, p2p, 1, comm->transports->slotBytes());
}

Status planPointToPoint(loomComm_t comm, const std::vector<Operation>& ops, BoundPlan* out, PlanFor target) {
  // Point-to-point plans count bytes: a send and its receive may name different datatypes.
  out->buffers = {nullptr, nullptr, nullptr};
  size_t moving = 0;  // operations with bytes to move
  const Operation* lone = nullptr;
  for (const Operation& op : ops) {
    if (op.count * dataTypeSize(op.dtype) == 0) continue;
    ++moving, lone = &op;
    if (op.anySource) out->anySource = op.anySource;
    out->buffers.push_back(op.isSend ? const_cast<char*>(static_cast<const char*>(op.send)) : static_cast<char*>(op.recv));
  }
  out->call = ops.front();
  out->seq = comm->opCount;
  out->groupSize = ops.size();
  out->describe = describeGroup;
  out->dtype = loomUint8;
  out->elemSize = 1;
  const uint32_t channel = target == PlanFor::Host ? static_cast<uint32_t>(comm->transports->p2pChannel()) : 0;
  const uint64_t chunk = comm->transports->slotBytes();
  // A lone send or receive (pipeline stages, torch's send/recv) reuses its plan, as a collective does.
  PlanKey key{Collective::SendRecv, Algorithm::Direct, 0, 0, 1, chunk, static_cast<int>(channel)};
  if (moving == 1) {
    key.root = lone->root;
    key.count = lone->count * dataTypeSize(lone->dtype);
    key.p2pDirection = lone->isSend ? 1 : 2;
    if ((out->plan = comm->planCache.find(key))) return Status::Ok();
  }
  std::vector<P2pOp> p2p;
  for (const Operation& op : ops)
    if (const uint64_t bytes = op.count * dataTypeSize(op.dtype); bytes > 0) p2p.push_back(P2pOp{op.isSend, op.root, bytes});
  auto plan = std::make_shared<Plan>();
  LOOM_TRY(buildP2pPlan(comm->nranks, comm->rank, p2p, chunk, plan.get(), channel).withContext(describeGroup(*out)));
  if (moving == 1) comm->planCache.insert(key, plan);
  out->plan = std::move(plan);
  return Status::Ok();
}

}  // namespace loom
