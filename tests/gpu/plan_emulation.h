// Runs plans the way the CUDA plan kernel will, without a GPU: every rank's plan is encoded
// (kernels/cuda/device_plan.h) over FIFOs in host memory, and every lane of every rank runs
// plan_interpreter.cuh's code on its own host thread(s); or several plans of every rank in one launch,
// as a plan sequence. Also a reference run of the same plans with
// core/run/executor.cc's step semantics over the CPU kernels, to compare with bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "algorithms/plan.h"
#include "base/status.h"
#include "kernels/cpu/reduce.h"
#include "device/plan_encoder.h"
#include "kernels/cuda/host_lane_platform.h"

namespace loomgpu {

// Host memory with guard bytes before and after, aligned to 64 bytes plus `shift` (so that two blocks
// of one shape have the same alignment, and a shift makes element-by-element paths run).
class GuardedBlock {
 public:
  static constexpr size_t kGuard = 64;
  GuardedBlock(size_t bytes, size_t shift);
  char* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  // The whole allocation, guards included, for comparing two runs.
  const char* whole() const { return raw_.get(); }
  size_t wholeBytes() const { return total_; }
  void copyFrom(const GuardedBlock& other);  // same shape

 private:
  struct Free {
    void operator()(char* p) const;
  };
  std::unique_ptr<char, Free> raw_;
  size_t total_ = 0;
  size_t bytes_ = 0;
  char* data_ = nullptr;
};

// One FIFO per (sender, receiver, channel), nslots x slotBytes, with its counters on their own lines;
// with `directPosts`, also the posts of direct mode (kernels/cuda/device_plan_layout.h's
// DeviceDirectPost), as the p2p transport makes them for ranks that share an address space.
class HostFifoMesh {
 public:
  HostFifoMesh(int nranks, uint32_t nchannels, uint32_t nslots, size_t slotBytes, bool directPosts = false);
  int nranks() const { return nranks_; }
  uint32_t nchannels() const { return nchannels_; }
  // rank's tables as device_plan.h wants them: [peer * nchannels + channel].
  std::vector<loom::cuda::DeviceFifo> sends(int rank) const;
  std::vector<loom::cuda::DeviceFifo> recvs(int rank) const;
  // The FIFO from `from` to `to` on `channel`, to look into its slots and size words after a run.
  loom::cuda::DeviceFifo view(int from, int to, uint32_t channel) const;
  // Every rank's boards of peer-memory plans (one per channel), by rank, as the encoder binds them:
  // host memory of one process, so every rank sees every board at the same address.
  std::span<loom::cuda::DevicePeerBoard* const> boards() const { return boardTable_; }
  loom::cuda::FifoScope scope() const { return scope_; }
  // The scope every FIFO says its counters need (device_plan_layout.h; the host ignores it, and the
  // tests count the releases made at each).
  void setScope(loom::cuda::FifoScope scope);

 private:
  struct Fifo {
    std::vector<std::max_align_t> slots;
    std::unique_ptr<loom::cuda::DeviceFifoCounter> tail, head;
    std::vector<uint64_t> sizes;
    std::vector<loom::cuda::DeviceDirectPost> posts;
    std::vector<uint64_t> lowLatency;
    loom::cuda::DeviceFifo view;
  };
  const Fifo* fifo(int from, int to, uint32_t channel) const;
  int nranks_;
  uint32_t nchannels_;
  loom::cuda::FifoScope scope_ = loom::cuda::FifoScope::System;
  std::vector<std::vector<loom::cuda::DevicePeerBoard>> boards_;  // by rank, by channel
  std::vector<loom::cuda::DevicePeerBoard*> boardTable_;
  std::vector<std::unique_ptr<Fifo>> fifos_;  // [(from * nranks + to) * nchannels + channel]; null on the diagonal
};

// One rank's plan and the memory it runs on (by plan buffer index; null where unused).
struct RankRun {
  const loom::Plan* plan = nullptr;
  std::vector<char*> buffers;
};

struct EmulationOptions {
  uint32_t workersPerLane = 1;  // host threads sharing one lane, as a block's threads do
  uint64_t timeoutNs = 30'000'000'000ull;
  uint32_t* abort = nullptr;  // shared by every rank of the run (a communicator's abort word)
  std::vector<uint32_t> startDelayMs;  // by rank: how long its lanes sleep before they start (none: 0)
  uint64_t lowLatencyBytes = 0;  // messages up to this size travel as low-latency words (0: none)
  loom::cuda::HostLaneCounts* counts = nullptr;  // where every lane counts its releases and acquires (or none)
  bool profile = false;  // encode the plans to time their steps (LOOM_DEVICE_PROFILE)
  // Peer-memory plans: peers' buffers translated through this table, as between rank processes (none:
  // used as published, as between rank threads).
  const loom::cuda::DeviceWindowTable* windows = nullptr;
  // runEmulated: each rank's lanes' statuses after the run, by rank (or not kept).
  std::vector<std::vector<loom::cuda::DeviceLaneStatus>>* laneStatuses = nullptr;
};

// Encodes every rank's plan over `mesh` and runs all of their lanes at once, each on its own
// thread(s); returns each rank's result (its encoding error, or devicePlanResult).
std::vector<loom::Status> runEmulated(const std::vector<RankRun>& ranks, const HostFifoMesh& mesh, loomDataType_t dtype,
                                      const loom::ReduceOp& op, const EmulationOptions& options = {});

// One operation of a rank's plan sequence: its plan and memory, and the operator it reduces with.
struct SequencedRun {
  RankRun run;
  loom::ReduceOp op;
};

// What one plan of a sequence reported: devicePlanResult of its lane statuses (or its encoding error,
// and then nothing ran), and the statuses themselves.
struct SequencedResult {
  loom::Status status;
  std::vector<loom::cuda::DeviceLaneStatus> lanes;
};

// The way the library launches a group's operations (kernels/cuda/plan_launch.h): every rank's plans,
// in order and all of `dtype`, are encoded into one plan sequence (device/plan_encoder.h) over `mesh`,
// and every rank's launch runs at once, as many blocks as its plans have lanes at most, each on
// options.workersPerLane threads. Returns what each plan of each rank reported, [rank][plan].
std::vector<std::vector<SequencedResult>> runSequenceEmulated(const std::vector<std::vector<SequencedRun>>& ranks,
                                                              const HostFifoMesh& mesh, loomDataType_t dtype,
                                                              const EmulationOptions& options = {});

// Runs the same plans one step at a time with core/run/executor.cc's semantics over the CPU kernels
// (kernels/cpu/reduce.h) and unbounded queues; an error when the plans cannot finish.
loom::Status runReference(const std::vector<RankRun>& ranks, loomDataType_t dtype, const loom::ReduceOp& op);

}  // namespace loomgpu
