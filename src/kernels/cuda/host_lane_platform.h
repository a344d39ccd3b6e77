// The host policy of plan_interpreter.cuh: a lane run by one or more host threads over FIFOs in host
// memory. It is how the tests run the device interpreter's own code without a GPU; with several
// workers per lane it also checks that the interpreter's barriers are where they must be.
#pragma once

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <thread>

#include "base/cpu_relax.h"
#include "kernels/cuda/plan_interpreter.cuh"

namespace loom::cuda {

// What the operations a lane made would cost a GPU, counted where a test asks: the releases (a release
// store, a pair of them, a compare-and-swap or fetch-and-add: a fence each on a GPU) by scope, and the
// acquiring loads (reads of a peer's counter that must wait for the memory system).
struct HostLaneCounts {
  std::atomic<uint64_t> systemReleases{0}, gpuReleases{0}, acquires{0};
};

// What the workers of one lane share (a thread block's shared memory, on a GPU).
struct HostLane {
  explicit HostLane(uint32_t workers, HostLaneCounts* counts = nullptr) : workers(workers), sync(workers), counts(counts) {}
  uint32_t workers;
  std::barrier<> sync;
  LaneShared shared{};
  HostLaneCounts* counts;  // or null: nothing counted
};

class HostLanePlatform {
 public:
  HostLanePlatform(HostLane* lane, uint32_t worker) : lane_(lane), worker_(worker) {}

  uint32_t worker() const { return worker_; }
  uint32_t workers() const { return lane_->workers; }
  void barrier() {
    if (lane_->workers > 1) lane_->sync.arrive_and_wait();
  }
  LaneShared& shared() { return lane_->shared; }

  // One host: every scope is the same (std::atomic's orderings hold between all threads).
  uint64_t loadAcquire(const uint64_t* p, FifoScope) const {
    count(&HostLaneCounts::acquires);
    return ref(p).load(std::memory_order_acquire);
  }
  static uint64_t loadRelaxed(const uint64_t* p, FifoScope) { return ref(p).load(std::memory_order_relaxed); }
  void storeRelease(uint64_t* p, uint64_t v, FifoScope scope) const {
    countRelease(scope);
    ref(p).store(v, std::memory_order_release);
  }
  static void storeRelaxed(uint64_t* p, uint64_t v, FifoScope) { ref(p).store(v, std::memory_order_relaxed); }
  // Two release stores, counted as the one fence a GPU makes them with (not a fence and two relaxed
  // stores here: ThreadSanitizer does not model standalone fences, and the tests run this under it).
  void storeReleaseBoth(uint64_t* a, uint64_t va, uint64_t* b, uint64_t vb, FifoScope scope) const {
    countRelease(scope);
    ref(a).store(va, std::memory_order_release);
    ref(b).store(vb, std::memory_order_release);
  }
  static uint32_t loadFlag(const uint32_t* p) {
    return std::atomic_ref<uint32_t>(*const_cast<uint32_t*>(p)).load(std::memory_order_acquire);
  }
  uint64_t fetchAdd(uint64_t* p, uint64_t v, FifoScope scope) const {
    countRelease(scope);
    return ref(p).fetch_add(v, std::memory_order_acq_rel);
  }
  bool compareExchange(uint64_t* p, uint64_t expected, uint64_t desired, FifoScope scope) const {
    countRelease(scope);
    return ref(p).compare_exchange_strong(expected, desired, std::memory_order_acq_rel, std::memory_order_acquire);
  }
  static void raiseFlag(uint32_t* p) { std::atomic_ref<uint32_t>(*p).store(1, std::memory_order_release); }
  static void noteWaiting(uint32_t* p, uint32_t v) { std::atomic_ref<uint32_t>(*p).store(v, std::memory_order_relaxed); }

  static uint64_t nowNs() {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
  }
  // Spin briefly, then give the core away: the tests run more lanes than the machine has cores.
  static void pause(uint32_t round) {
    if (round < 64) {
      loom::cpuRelax();
    } else {
      std::this_thread::yield();
    }
  }

 private:
  static std::atomic_ref<uint64_t> ref(const uint64_t* p) {
    return std::atomic_ref<uint64_t>(*const_cast<uint64_t*>(p));
  }
  void count(std::atomic<uint64_t> HostLaneCounts::*which) const {
    if (lane_->counts) (lane_->counts->*which).fetch_add(1, std::memory_order_relaxed);
  }
  void countRelease(FifoScope scope) const {
    count(scope == FifoScope::Gpu ? &HostLaneCounts::gpuReleases : &HostLaneCounts::systemReleases);
  }
  HostLane* lane_;
  uint32_t worker_;
};

// Runs lane `laneIndex` of an encoded plan in host memory, bound by `call`, on the calling thread as
// worker `worker` of `lane` (every worker of the lane must call it), for the plan's dtype.
inline bool runLaneOnHost(const void* encoded, const DevicePlanCall& call, uint32_t laneIndex, HostLane* lane,
                          uint32_t worker) {
  HostLanePlatform platform(lane, worker);
  const loomDataType_t dtype = static_cast<const DevicePlanHeader*>(encoded)->dtype;
  return withElem(dtype, [&](auto elem) { runLane<decltype(elem)>(encoded, call, laneIndex, platform); });
}

// The same for block `block` of a launch of a plan sequence (DeviceLaunchArgs).
inline bool runSequenceOnHost(const DeviceLaunchArgs& args, uint32_t block, HostLane* lane, uint32_t worker) {
  HostLanePlatform platform(lane, worker);
  auto* seq = static_cast<const DevicePlanSequence*>(args.sequence);
  if (seq->nplans == 0) return true;
  const loomDataType_t dtype = static_cast<const DevicePlanHeader*>(sequencePlan(seq, 0))->dtype;
  return withElem(dtype, [&](auto elem) { runSequence<decltype(elem)>(args, block, platform); });
}

}  // namespace loom::cuda
