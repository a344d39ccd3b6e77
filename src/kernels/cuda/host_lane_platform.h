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

// What the workers of one lane share (a thread block's shared memory, on a GPU).
struct HostLane {
  explicit HostLane(uint32_t workers) : workers(workers), sync(workers) {}
  uint32_t workers;
  std::barrier<> sync;
  LaneShared shared{};
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

  static uint64_t loadAcquire(const uint64_t* p) { return ref(p).load(std::memory_order_acquire); }
  static uint64_t loadRelaxed(const uint64_t* p) { return ref(p).load(std::memory_order_relaxed); }
  static void storeRelease(uint64_t* p, uint64_t v) { ref(p).store(v, std::memory_order_release); }
  static void storeRelaxed(uint64_t* p, uint64_t v) { ref(p).store(v, std::memory_order_relaxed); }
  static uint32_t loadFlag(const uint32_t* p) {
    return std::atomic_ref<uint32_t>(*const_cast<uint32_t*>(p)).load(std::memory_order_acquire);
  }
  static uint64_t fetchAdd(uint64_t* p, uint64_t v) { return ref(p).fetch_add(v, std::memory_order_acq_rel); }
  static bool compareExchange(uint64_t* p, uint64_t expected, uint64_t desired) {
    return ref(p).compare_exchange_strong(expected, desired, std::memory_order_acq_rel, std::memory_order_acquire);
  }
  static void raiseFlag(uint32_t* p) { std::atomic_ref<uint32_t>(*p).store(1, std::memory_order_release); }

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
