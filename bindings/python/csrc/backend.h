// c10d::Backend for Loom: every operation is queued on a nonblocking Loom communicator and
// returns a LoomWork at once; a Completer completes the Works (and their futures) in order.
// Tensors of one call are all on the CPU or all on one CUDA device; CUDA calls are ordered on
// torch's current stream of that device (stream_order.h).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "comm.h"
#include "completer.h"
#include "dtype_map.h"
#include "monitored_barrier.h"
#include "staging.h"
#include "stream_order.h"
#include "work.h"

namespace loomtorch {

class LoomBackend : public c10d::Backend {
 public:
  LoomBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds timeout,
              const std::string& groupName);
  // The group made by shrink(): its communicator adopted.
  LoomBackend(const c10::intrusive_ptr<c10d::Store>& store, std::shared_ptr<Comm> comm);
  ~LoomBackend() override;

  // dist.shrink_group: loomCommShrink without the excluded ranks (SHRINK_ABORT is LOOM_SHRINK_ABORT:
  // the group's operations in flight are revoked first); the options override is not read.
  bool supportsShrinking() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> shrink(const std::vector<int64_t>& ranksToExclude, int shrinkFlags,
                                           const c10::intrusive_ptr<Options>& optsOverride) override;

  const std::string getBackendName() const override { return "loom"; }
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  void shutdown() override;
  void abort() override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputLists,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& outputSplits,
                                               std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  // Refused with the reason: Loom's receives name their peer.
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  // Gloo's semantics (monitored_barrier.h): rank 0 names the ranks that did not arrive in time.
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) override;
  // Sparse COO tensors on the CPU, summed (sparse.cc); dense ones go to allreduce.
  c10::intrusive_ptr<c10d::Work> allreduce_sparse(std::vector<at::Tensor>& tensors,
                                                  const c10d::AllreduceOptions& opts) override;
  // Collectives issued so far on this group (point-to-point operations do not count): the same on
  // every rank unless the ranks disagree on what they call, which is what
  // TORCH_DISTRIBUTED_DEBUG=DETAIL's checks look for.
  uint64_t getSequenceNumberForGroup() override { return sequence_.load(); }

  // The library file behind this extension's Loom calls (for the ctypes binding and diagnostics).
  static std::string libraryPath();

 private:
  // All-gathers of several inputs; perInput[i][r] receives rank r's inputs[i] (the layout of
  // allgather; allgather_coalesced's lists are transposed: [r][i]).
  c10::intrusive_ptr<c10d::Work> allgatherPerInput(const std::vector<std::vector<at::Tensor>>& perInput,
                                                   std::vector<at::Tensor>& inputs, c10d::OpType type,
                                                   const c10d::AllgatherOptions& opts);

  // One operation as the Work sees it.
  struct Op {
    c10d::OpType type;
    std::chrono::milliseconds timeout;  // kUnsetTimeout: the group's
    std::vector<at::Tensor> outputs;    // the future's value
    Staging staging;
    RedOps redOps;
    c10::Device device{c10::kCPU};  // of every tensor of the call (CallDevice)
    // What the profiler shows as the operation's inputs: the tensors this rank contributes, or for
    // a call that only receives (recv, scatter off the root) the tensors it receives into.
    std::vector<at::Tensor> profiled;
  };
  // Runs `calls` (Loom calls on the communicator and the call's stream, NULL for CPU calls; several
  // go inside one Loom group) and returns the Work that completes with them.
  using Calls = std::function<void(loomComm_t comm, loomStream_t stream, RedOps& redOps)>;
  c10::intrusive_ptr<c10d::Work> issue(Op op, const Calls& calls);
  // A coalescing block becomes one Loom group, and its Work one mark on one stream.
  void checkBlockStream(c10::Device device, const CallStream& stream);
  int checkRoot(int64_t root, const char* what) const;
  c10::intrusive_ptr<c10d::Work> allreduceSparse(at::Tensor& t, const c10d::AllreduceOptions& opts);

  c10::intrusive_ptr<c10d::Store> store_;
  std::shared_ptr<Comm> comm_;
  std::unique_ptr<Completer> completer_;
  MonitoredBarrier monitored_;
  std::atomic<uint64_t> sequence_{0};
  int shrinks_ = 0;  // groups made by shrink(): each has its own store keys
  std::mutex issueMutex_;  // issue order = Loom's op id order = completion order
  bool coalescing_ = false;
  std::vector<c10::intrusive_ptr<LoomWork>> coalesced_;
  RedOps coalescedRedOps_;
  std::optional<c10::Device> blockDevice_;  // of the open coalescing block's first operation
  std::optional<c10::Stream> blockStream_;
};

// Runs Loom calls as one Loom group: loomGroupEnd runs even when a call throws.
void grouped(const std::function<void()>& calls);

}  // namespace loomtorch
