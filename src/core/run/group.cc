#include "core/run/group.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "base/datatype.h"
#include "base/thread_scratch.h"
#include "core/run/async_engine.h"
#include "core/communicator.h"
#include "core/job_setup.h"
#include "core/run/executor.h"
#include "core/run/kernel_plan_binding.h"
#include "core/run/planner.h"
#include "core/observe/signature_check.h"
#include "device/device_layer.h"

namespace loom {
namespace {

struct GroupState {
  int depth = 0;
  std::vector<Operation> ops;
  std::vector<std::function<Status()>> inits;  // deferToGroupEnd's
};
thread_local GroupState tlsGroup;

CommWork workFor(loomComm_t comm) {
  CommWork w;
  w.transports = comm->transports.get();
  w.abort = &comm->aborted;
  w.timeoutMs = comm->settings.timeoutMs;
  w.spinNs = comm->spinNs;
  w.waitHistory = comm->waitHistory.get();
  w.oversubscribed = comm->oversubscribed;
  w.sharing = comm->callerSharing.get();
  w.tracer = comm->tracer.get();
  w.flight = &comm->flight;
  return w;
}

// The communicators of `ops`, each once, in address order: every thread locks them in the same order.
void commsOf(const std::vector<Operation>& ops, std::vector<loomComm_t>* comms) {
  comms->clear();
  for (const Operation& op : ops) comms->push_back(op.comm);
  std::sort(comms->begin(), comms->end(), std::less<loomComm_t>());
  comms->erase(std::unique(comms->begin(), comms->end()), comms->end());
}

std::vector<loomComm_t> commsOf(const std::vector<Operation>& ops) {
  std::vector<loomComm_t> comms;
  commsOf(ops, &comms);
  return comms;
}

// ---- Host operations ---------------------------------------------------------------------------

// A group's sends and receives on one communicator are one entry of its flight record: their bytes,
// and their peer when they all have the same one (-1 otherwise).
struct PointToPointEntry {
  uint64_t bytes = 0;
  int peer = -1;
};
PointToPointEntry pointToPointEntry(const std::vector<Operation>& p2p) {
  PointToPointEntry e;
  e.peer = p2p.front().root;
  for (const Operation& op : p2p) {
    e.bytes += op.count * dataTypeSize(op.dtype);
    if (op.root != e.peer) e.peer = -1;
  }
  return e;
}

// Plans one communicator's share of a group: each collective in call order, then one plan for all
// its point-to-point operations. A communicator with a progress thread gets them queued there; a
// blocking one without gets them appended to `blocking` for the caller to run. Gated operations
// (device buffers staged on a stream) always go to the progress thread, which starts it if needed.
// `w` is a CommWork of this thread's to fill (its plans keep their capacity from earlier calls);
// *runsHere says whether it was filled for the caller to run.
Status planForComm(loomComm_t comm, const std::vector<Operation>& ops, bool soleComm, CommWork* slot, bool* runsHere) {
  const bool gated = std::any_of(ops.begin(), ops.end(), [&](const Operation& op) { return op.comm == comm && op.gate; });
  // Started by the first gated operation: everything before ran on its caller and is complete.
  if (gated && !comm->engine) comm->engine = std::make_unique<AsyncEngine>(comm, comm->opCount);
  AsyncEngine* engine = comm->engine.get();
  *runsHere = !engine;
  // The last call's plans become this thread's spares, recycled one by one: their vectors keep their
  // capacity, so that a small operation allocates none for its buffers and scratch (plans queued on
  // a progress thread are new ones).
  ThreadScratch<BoundPlan> spareScratch;
  std::vector<BoundPlan>& spares = spareScratch.get();
  for (BoundPlan& bp : slot->plans) {
    bp.recycle();
    spares.push_back(std::move(bp));
  }
  auto recycledPlan = [&spares]() -> BoundPlan {
    if (spares.empty()) return BoundPlan{};
    BoundPlan bp = std::move(spares.back());
    spares.pop_back();
    return bp;
  };
  std::vector<BoundPlan> keptPlans = std::move(slot->plans);
  keptPlans.clear();
  *slot = workFor(comm);
  slot->plans = std::move(keptPlans);
  CommWork& w = *slot;
  // The point-to-point operations, in a vector this thread keeps (a vector of them: submitOperation
  // already borrows the thread's vector of operations); emptied at the next call.
  ThreadScratch<std::vector<Operation>> p2pScratch;
  if (p2pScratch.get().empty()) p2pScratch.get().emplace_back();
  std::vector<Operation>& p2p = p2pScratch.get().front();
  p2p.clear();
  std::vector<std::shared_ptr<device::OperationGate>> p2pGates;
  for (const Operation& op : ops) {
    if (op.comm != comm) continue;
    if (op.coll == Collective::SendRecv) {
      p2p.push_back(op);
      if (op.gate) p2pGates.push_back(op.gate);
      continue;
    }
    ++comm->opCount;
    comm->flight.issued(comm->opCount, op.coll, op.count, op.dtype, isRooted(op.coll) ? op.root : -1);
    BoundPlan bp = engine ? BoundPlan{} : recycledPlan();
    // The check talks over the bootstrap and would wait forever for ranks this same thread drives.
    Status planned;
    if (comm->settings.checkSignatures && soleComm) planned = checkCollectiveSignature(comm, op, comm->opCount);
    if (planned.ok() && op.count > 0) planned = planCollective(comm, op, &bp);
    if (!planned.ok()) {
      // The operation's id is taken: a progress thread completes it empty, or waits for it would not end.
      if (engine) engine->submit(comm->opCount, workFor(comm), true);
      return planned;
    }
    if (engine) {
      CommWork single = workFor(comm);
      if (op.count > 0) single.plans.push_back(std::move(bp));
      engine->submit(comm->opCount, std::move(single), true,
                     op.gate ? std::vector{op.gate} : std::vector<std::shared_ptr<device::OperationGate>>{});
    } else if (op.count > 0) {
      w.plans.push_back(std::move(bp));
    }
  }
  if (!p2p.empty()) {
    ++comm->opCount;
    const PointToPointEntry entry = pointToPointEntry(p2p);
    comm->flight.issued(comm->opCount, Collective::SendRecv, entry.bytes, loomUint8, entry.peer);
    BoundPlan bp = engine ? BoundPlan{} : recycledPlan();
    if (Status planned = planPointToPoint(comm, p2p, &bp); !planned.ok()) {
      if (engine) engine->submit(comm->opCount, workFor(comm), true);  // as above
      return planned;
    }
    CommWork single = workFor(comm);
    CommWork& target = engine ? single : w;
    if (!bp.plan->lanes.empty()) target.plans.push_back(std::move(bp));
    if (engine) engine->submit(comm->opCount, std::move(single), false, std::move(p2pGates));
  }
  return Status::Ok();
}

// A blocking communicator whose progress thread runs gated operations still returns from a host
// operation only when it is complete: it waits for its own queued work.
Status waitIfBlocking(loomComm_t comm, const std::vector<Operation>& ops) {
  if (!comm->settings.blocking || !comm->engine) return Status::Ok();
  const bool ungated = std::any_of(ops.begin(), ops.end(), [&](const Operation& op) { return op.comm == comm && !op.gate; });
  return ungated ? comm->engine->wait(comm->opCount, -1) : Status::Ok();
}

// Runs (or queues) operations on host memory of the communicators `comms` (commsOf(ops)), whose
// `busy` locks the caller holds.
Status runHostOperations(const std::vector<Operation>& ops, const std::vector<loomComm_t>& comms) {
  // This thread's CommWorks, kept from call to call (as executeWork keeps its runners): a small
  // operation allocates no vectors here.
  ThreadScratch<CommWork> scratch;
  std::vector<CommWork>& slots = scratch.get();
  if (slots.size() < comms.size()) slots.resize(comms.size());
  size_t used = 0;
  for (loomComm_t comm : comms) {
    bool runsHere = false;
    LOOM_TRY(planForComm(comm, ops, comms.size() == 1, &slots[used], &runsHere));
    if (runsHere) ++used;
  }
  for (loomComm_t comm : comms) LOOM_TRY(waitIfBlocking(comm, ops));
  // What ran here is complete once executeWork returns (a progress thread records its own).
  auto recordCompleted = [&comms] {
    for (loomComm_t comm : comms)
      if (!comm->engine) comm->flight.completedUpTo(comm->opCount);
  };
  if (used == 0) {
    recordCompleted();
    return Status::Ok();
  }
  int failed = -1;
  Status st = executeWork(std::span<CommWork>(slots.data(), used), &failed);
  if (st.ok()) recordCompleted();
  if (!st.ok()) {
    // The peers of every communicator of the group may now wait on us: tell them all.
    for (loomComm_t comm : comms) {
      if (comm->engine) continue;  // only the communicators run here
      if (!comm->aborted.load()) markCommFailed(comm, st, true);
      std::lock_guard<std::mutex> lock(comm->errorMutex);
      comm->lastError = st.message();
    }
  }
  return st;
}

// Waits until the operations queued on communicators' progress threads are complete (staged
// buffers are copied back right after).
Status waitForQueuedWork(const std::vector<Operation>& ops) {
  Status first;
  for (loomComm_t comm : commsOf(ops)) {
    if (!comm->engine) continue;
    Status st = comm->engine->wait(comm->opCount, -1);
    if (first.ok() && !st.ok()) first = st;
  }
  return first;
}

// ---- Routing: each operation once, by communicator and memory kind ----------------------------------

enum class Route : uint8_t {
  Host,    // host memory: the executor, on this thread or the communicator's progress thread
  Staged,  // CUDA memory through pinned host copies (device_layer.h's runStaged), then as Host
  Kernel,  // device memory as a plan kernel on the operation's stream (device_layer.h's CommDevice)
};

struct Routing {
  std::vector<Route> route;
  std::vector<device::Placement> where;  // by operation
  bool any(Route r) const { return std::find(route.begin(), route.end(), r) != route.end(); }
};

// Where each operation's buffers are decides its route (CUDA is usable in this process), into `r`
// (its vectors keep their capacity: a caller that keeps one allocates nothing for a single operation).
void routeOperations(const std::vector<Operation>& ops, Routing* out) {
  Routing& r = *out;
  r.route.assign(ops.size(), Route::Host);
  r.where.resize(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    size_t sendBytes = 0, recvBytes = 0;
    bufferBytes(ops[i], &sendBytes, &recvBytes);
    r.where[i] = device::placementOf(ops[i].send, sendBytes, ops[i].recv, recvBytes);
    if (!r.where[i].touchesCuda()) continue;
    r.route[i] = r.where[i].kernelGpu >= 0 && ops[i].comm->device ? Route::Kernel : Route::Staged;
  }
  // A communicator's point-to-point operations are one plan: all plan kernels, or none.
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i].coll == Collective::SendRecv && r.route[i] != Route::Kernel)
      for (size_t j = 0; j < ops.size(); ++j)
        if (ops[j].comm == ops[i].comm && ops[j].coll == Collective::SendRecv && r.route[j] == Route::Kernel)
          r.route[j] = Route::Staged;
}

Routing routeOperations(const std::vector<Operation>& ops) {
  Routing r;
  routeOperations(ops, &r);
  return r;
}

// Sets plan kernels up on the communicators that meet them for the first time (collectively, see
// device_layer.h), then sends to staging whatever they cannot run.
Status settleKernelRoutes(const std::vector<Operation>& ops, Routing* r) {
  std::vector<std::pair<device::CommDevice*, int>> pending;
  std::vector<loomComm_t> pendingComms;  // pending's communicators, in its order
  for (size_t i = 0; i < ops.size(); ++i) {
    device::CommDevice* dev = ops[i].comm->device.get();
    if (r->route[i] != Route::Kernel || dev->planKernelSetup() != device::PlanKernelSetup::NotYet) continue;
    if (std::any_of(pending.begin(), pending.end(), [&](const auto& p) { return p.first == dev; })) continue;
    // The setup exchanges with every rank and allocates: nothing a capture may hold.
    for (const Operation& op : ops) {
      device::StreamCapture capture;
      if (op.comm == ops[i].comm) LOOM_TRY(device::captureOf(op.stream, &capture));
      if (capture.active)
        return errorStatus(loomInvalidUsage,
                           "{} on {}: the communicator sets up its GPU transport at its first operation on device "
                           "buffers, which cannot happen during CUDA graph capture: run one such operation before "
                           "capturing (nothing was enqueued)",
                           operationName(op), op.comm->describe());
    }
    pending.emplace_back(dev, r->where[i].kernelGpu);
    pendingComms.push_back(ops[i].comm);
  }
  if (!pending.empty()) LOOM_TRY(device::setUpPlanKernels(pending));
  for (loomComm_t comm : pendingComms)
    if (comm->device->planKernelSetup() == device::PlanKernelSetup::Ready) adoptDeviceFabric(comm);
  for (size_t i = 0; i < ops.size(); ++i) {
    if (r->route[i] != Route::Kernel) continue;
    const device::CommDevice& dev = *ops[i].comm->device;
    if (dev.planKernelSetup() != device::PlanKernelSetup::Ready) {
      if (dev.planKernelsRequired())
        return errorStatus(loomInvalidUsage, "{} on {}: LOOM_DEVICE_PLANS=require, but plan kernels cannot run: {}",
                           operationName(ops[i]), ops[i].comm->describe(), dev.planKernelRefusal());
      r->route[i] = Route::Staged;
    } else if (r->where[i].kernelGpu != dev.planKernelGpu()) {
      return errorStatus(loomInvalidUsage, "{} on {}: its buffers are on GPU {}, the communicator runs on GPU {}",
                         operationName(ops[i]), ops[i].comm->describe(), r->where[i].kernelGpu, dev.planKernelGpu());
    }
  }
  return Status::Ok();
}

// A receive from any source watches the host transports' point-to-point channel of every peer. On a
// communicator that runs device buffers through plan kernels, a peer's send from GPU memory travels
// through GPU FIFOs instead, where it would never see it: refused rather than left to time out.
Status refuseAnySourceIntoKernelMemory(const std::vector<Operation>& ops, const Routing& r) {
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i].coll == Collective::SendRecv && ops[i].root == kAnyPeer && r.route[i] == Route::Kernel)
      return errorStatus(loomInvalidUsage,
                         "{} on {}: its buffer is GPU memory on a communicator whose device-buffer sends run in plan "
                         "kernels, which a receive from any source cannot watch; receive into host memory (nothing "
                         "of the group ran)",
                         operationName(ops[i]), ops[i].comm->describe());
  return Status::Ok();
}

// What runs through the host path (staged or not) on a stream being captured into a CUDA graph is
// refused, before anything of the group is launched: its host side would not be in the graph.
Status refuseCapturedHostWork(const std::vector<Operation>& ops, const Routing& r) {
  for (size_t i = 0; i < ops.size(); ++i) {
    if (r.route[i] == Route::Kernel || !ops[i].stream) continue;
    device::StreamCapture capture;
    LOOM_TRY(device::captureOf(ops[i].stream, &capture));
    if (capture.active)
      return errorStatus(loomInvalidUsage,
                         "{} on {}: its stream is being captured into a CUDA graph, which Loom supports only for "
                         "device buffers run as plan kernels (LOOM_DEVICE_PLANS, src/device/README.md); this "
                         "operation would {}: call it outside the capture (nothing was enqueued)",
                         operationName(ops[i]), ops[i].comm->describe(),
                         r.route[i] == Route::Staged ? "be staged through host memory" : "run on host memory");
  }
  return Status::Ok();
}

// ---- Plan kernels -------------------------------------------------------------------------------

// The plan a kernel's operation is bound to, kept by the thread from call to call (launchKernels).
struct KernelBoundPlan {
  BoundPlan bound;
};

// A plan kernel's operation takes the communicator's next number, as a host one does, and goes into
// its flight record (marked as the device's: its launch says when it ended, DeviceProgress), so that
// the hang report and loom-doctor line it up with the other ranks'. A progress thread, which counts
// the operations it completes one by one, completes the number at once: it has nothing to run.
uint64_t numberDeviceOperation(loomComm_t comm, Collective coll, uint64_t count, loomDataType_t dtype, int peer) {
  const uint64_t seq = ++comm->opCount;
  comm->flight.issued(seq, coll, count, dtype, peer, FlightRecord::Runs::OnDevice);
  if (comm->engine) comm->engine->submit(seq, workFor(comm), coll != Collective::SendRecv);
  return seq;
}

// One communicator's share of a group as plan kernels: collectives in call order, then one plan for
// all its point-to-point operations (as the host path orders them).
Status launchKernels(loomComm_t comm, const std::vector<Operation>& ops, const Routing& r) {
  device::CommDevice& dev = *comm->device;
  const PlanAdjustment adjust = [&dev](Algorithm algo, PlanRequest* req) { return dev.adjustChannels(algo, req); };
  // This thread's, kept from call to call with their capacity (a steady call allocates none of them);
  // a plan kept in `plans` keeps its buffer vector too.
  ThreadScratch<device::KernelPlan> planScratch;
  ThreadScratch<loomStream_t> streamScratch;
  ThreadScratch<KernelBoundPlan> boundScratch;  // not BoundPlan's: planForComm keeps its spares there
  std::vector<device::KernelPlan>& plans = planScratch.get();
  std::vector<loomStream_t>& streams = streamScratch.get();
  if (boundScratch.get().empty()) boundScratch.get().emplace_back();
  BoundPlan& bp = boundScratch.get().front().bound;
  streams.clear();
  size_t used = 0;
  auto nextPlan = [&]() -> device::KernelPlan& {
    if (used == plans.size()) plans.emplace_back();
    return plans[used++];
  };
  std::vector<Operation> p2p;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].comm != comm || r.route[i] != Route::Kernel) continue;
    streams.push_back(ops[i].stream);
    if (ops[i].coll == Collective::SendRecv) {
      p2p.push_back(ops[i]);
      continue;
    }
    const Operation& op = ops[i];
    const uint64_t seq = numberDeviceOperation(comm, op.coll, op.count, op.dtype, isRooted(op.coll) ? op.root : -1);
    bp.recycle();
    LOOM_TRY(planCollective(comm, op, &bp, PlanFor::Device, adjust));
    bindKernelPlan(bp, seq, &nextPlan());
  }
  if (!p2p.empty()) {
    // One number for the group's sends and receives, as on the host (planForComm).
    const PointToPointEntry entry = pointToPointEntry(p2p);
    const uint64_t seq = numberDeviceOperation(comm, Collective::SendRecv, entry.bytes, loomUint8, entry.peer);
    bp.recycle();
    LOOM_TRY(planPointToPoint(comm, p2p, &bp, PlanFor::Device));
    if (!bp.plan->lanes.empty()) bindKernelPlan(bp, seq, &nextPlan());
  }
  plans.resize(used);  // (the calls' plans; a later call with more makes new ones)
  return dev.launch(plans, streams);
}

// ---- Staged and host operations -----------------------------------------------------------------

// The group's operations that run on host memory (staged ones included), in call order: the host
// path runs each communicator's collectives in call order.
Status runHostAndStaged(const std::vector<Operation>& ops, const std::vector<loomComm_t>& comms, const Routing& r) {
  std::vector<device::StagedCall> staged;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (r.route[i] != Route::Staged) continue;
    device::StagedCall call;
    call.send = ops[i].send;
    call.recv = ops[i].recv;
    bufferBytes(ops[i], &call.sendBytes, &call.recvBytes);
    call.placement = r.where[i];
    call.stream = ops[i].stream;
    call.comm = ops[i].comm->device.get();
    call.peerInThisProcess = ops[i].comm->transports->hasPeerInThisProcess();
    call.pointToPoint = ops[i].coll == Collective::SendRecv;
    staged.push_back(call);
  }
  auto hostPart = [&](std::span<const device::StagedCall> calls, bool mustComplete) {
    std::vector<Operation> run;
    size_t k = 0;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (r.route[i] == Route::Kernel) continue;
      run.push_back(ops[i]);
      if (r.route[i] != Route::Staged) continue;
      run.back().send = calls[k].send;
      run.back().recv = calls[k].recv;
      run.back().gate = calls[k].gate;
      ++k;
    }
    if (run.empty()) return Status::Ok();
    Status st = runHostOperations(run, commsOf(run));
    if (mustComplete) {
      Status waited = waitForQueuedWork(run);  // even after a failure: the pinned buffers go next
      if (st.ok()) st = waited;
    }
    return st;
  };
  if (staged.empty() && !r.any(Route::Kernel)) return runHostOperations(ops, comms);
  if (staged.empty()) return hostPart({}, false);
  return device::runStaged(staged, r.any(Route::Host), hostPart);
}

// Runs one group (or a single operation): every communicator it names is locked for the whole call.
Status runOperations(const std::vector<Operation>& ops) {
  ThreadScratch<loomComm_t> scratch;  // kept from call to call: a single operation allocates none
  std::vector<loomComm_t>& comms = scratch.get();
  commsOf(ops, &comms);
  // The first lock needs no vector: a single operation (one communicator) allocates none.
  std::unique_lock<std::mutex> firstLock(comms.front()->busy);
  std::vector<std::unique_lock<std::mutex>> locks;
  for (size_t i = 1; i < comms.size(); ++i) locks.emplace_back(comms[i]->busy);
  for (loomComm_t comm : comms) LOOM_TRY(checkCommUsable(comm));
  if (!device::cudaUsable()) return runHostOperations(ops, comms);  // no device memory in this process
  ThreadScratch<Routing> routingScratch;  // kept from call to call: routing a single operation allocates nothing
  if (routingScratch.get().empty()) routingScratch.get().emplace_back();
  Routing& routing = routingScratch.get().front();
  routeOperations(ops, &routing);
  LOOM_TRY(refuseAnySourceIntoKernelMemory(ops, routing));
  if (routing.any(Route::Kernel)) LOOM_TRY(settleKernelRoutes(ops, &routing));
  LOOM_TRY(refuseCapturedHostWork(ops, routing));
  // Plan kernels first: their launches return at once, while the host part below may wait for peers.
  if (routing.any(Route::Kernel))
    for (loomComm_t comm : comms) LOOM_TRY(launchKernels(comm, ops, routing));
  return runHostAndStaged(ops, comms, routing);
}

// The cost model's time for a group, in microseconds: each communicator's collectives one after
// another, then its sends and receives at once, as planForComm would run them; communicators run side
// by side, so the group takes as long as its slowest one. Plan kernels' operations are timed on the
// device model, the rest (staged ones too: their copies are not counted) on the host model.
Status predictGroup(const std::vector<Operation>& ops, double* us) {
  const Routing routing = device::cudaUsable() ? routeOperations(ops) : Routing{std::vector<Route>(ops.size(), Route::Host), {}};
  *us = 0;
  for (loomComm_t comm : commsOf(ops)) {
    std::lock_guard<std::mutex> lock(comm->busy);
    LOOM_TRY(checkCommUsable(comm));
    double commUs = 0;
    std::vector<Operation> p2p;
    PlanFor p2pTarget = PlanFor::Host;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].comm != comm) continue;
      const PlanFor target = routing.route[i] == Route::Kernel ? PlanFor::Device : PlanFor::Host;
      if (ops[i].coll == Collective::SendRecv) {
        p2p.push_back(ops[i]);
        p2pTarget = target;  // one plan: all kernels or none (routeOperations)
        continue;
      }
      double t = 0;
      if (ops[i].count > 0) LOOM_TRY(predictCollective(comm, ops[i], target, &t));
      commUs += t;
    }
    if (!p2p.empty()) commUs += predictPointToPoint(comm, p2p, p2pTarget);
    *us = std::max(*us, commUs);
  }
  return Status::Ok();
}

}  // namespace

Status submitOperation(const Operation& op) {
  LOOM_TRY(validateOperation(op));
  if (tlsGroup.depth > 0) {
    tlsGroup.ops.push_back(op);
    return Status::Ok();
  }
  // A group of one, in a vector this thread keeps (no allocation once warm); emptied afterwards so
  // that it holds no gate or buffer of the operation.
  ThreadScratch<Operation> scratch;
  std::vector<Operation>& single = scratch.get();
  single.assign(1, op);
  Status st = runOperations(single);
  single.clear();
  return st;
}

bool inGroup() { return tlsGroup.depth > 0; }

void deferToGroupEnd(std::function<Status()> init) { tlsGroup.inits.push_back(std::move(init)); }

namespace {

// The outermost end's first part: the group's deferred inits, each on a thread (each waits for its
// job's other ranks, some of which may be the others).
Status runDeferredInits() {
  std::vector<std::function<Status()>> inits;
  inits.swap(tlsGroup.inits);
  if (inits.empty()) return Status::Ok();
  std::vector<Status> results(inits.size());
  if (inits.size() == 1) {
    results[0] = inits[0]();
  } else {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < inits.size(); ++i) threads.emplace_back([&, i] { results[i] = inits[i](); });
    for (std::thread& t : threads) t.join();
  }
  for (const Status& st : results)
    if (!st.ok()) return st;
  return Status::Ok();
}

}  // namespace

Status groupStart() {
  ++tlsGroup.depth;
  return Status::Ok();
}

Status groupEnd() {
  if (tlsGroup.depth == 0) return errorStatus(loomInvalidUsage, "loomGroupEnd without loomGroupStart");
  if (--tlsGroup.depth > 0) return Status::Ok();
  if (Status inits = runDeferredInits(); !inits.ok()) {
    tlsGroup.ops.clear();  // the group's operations do not run after a failed init
    return inits;
  }
  std::vector<Operation> ops;
  ops.swap(tlsGroup.ops);
  if (ops.empty()) return Status::Ok();
  return runOperations(ops);
}

Status groupSimulateEnd(double* estimatedUs) {
  if (!estimatedUs) return invalidArgument("loomGroupSimulateEnd: estimatedUs is NULL");
  if (tlsGroup.depth == 0) return errorStatus(loomInvalidUsage, "loomGroupSimulateEnd without loomGroupStart");
  *estimatedUs = 0;
  // An inner end closes its level only, as loomGroupEnd does: the outermost end decides.
  if (--tlsGroup.depth > 0) return Status::Ok();
  if (Status inits = runDeferredInits(); !inits.ok()) {  // communicators are made, not simulated
    tlsGroup.ops.clear();
    return inits;
  }
  std::vector<Operation> ops;
  ops.swap(tlsGroup.ops);  // nothing runs: the group's operations are dropped once timed
  if (ops.empty()) return Status::Ok();
  return predictGroup(ops, estimatedUs);
}

}  // namespace loom
