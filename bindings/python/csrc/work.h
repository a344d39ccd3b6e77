// The Work handed back for every operation: completes when loomCommWaitOp says its operation (and
// everything the communicator accepted before it) is done, then marks its future, whose value is
// the list of output tensors.
//
// CPU operations run their copy-backs (staged outputs) when they complete. CUDA operations are
// ordered on torch's current stream, as with ProcessGroupNCCL: their copy-backs are enqueued on that
// stream right after the Loom calls, followed by an event; they complete once Loom finished and the
// stream passed the event, and wait() only makes the caller's current stream wait for the event.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "comm.h"
#include "stream_order.h"

namespace loomtorch {

class LoomWork : public c10d::Work {
 public:
  // `stream`: the CUDA stream the operation is ordered on; none for CPU operations. `profiled`: the
  // tensors a profiler event "loom:<op>" shows as the operation's inputs; the event starts here and
  // ends when the work completes (a coalesced block's own work records none: its operations do).
  LoomWork(std::shared_ptr<Comm> comm, c10d::OpType type, std::chrono::milliseconds timeout,
           std::vector<at::Tensor> outputs, std::vector<at::Tensor> keepAlive, std::function<void()> copyBack,
           std::optional<c10::Stream> stream, const std::vector<at::Tensor>& profiled = {});

  // CUDA operations: enqueues the copy-backs on the stream and records the mark after them. Called
  // once the Loom calls enqueued the operation (for a coalescing block: after loomGroupEnd) and
  // before assignOpId; nothing for CPU operations.
  void markOnStream();
  // The Loom operation id to wait for; unknown (0) while the op sits in an open coalescing group.
  void assignOpId(uint64_t id) { opId_.store(id); }
  uint64_t opId() const { return opId_.load(); }
  // Whether the stream passed the operation's mark (CPU operations: always); only after assignOpId.
  bool streamPassed() const { return !mark_ || mark_->passed(); }
  // Works completed (with their copy-backs) before this one completes: the ops of a coalesced block.
  void addChild(c10::intrusive_ptr<LoomWork> child) { children_.push_back(std::move(child)); }
  const std::vector<at::Tensor>& outputs() const { return outputs_; }
  // "barrier (operation 7)", for messages.
  std::string describe() const;
  // A receive from any source: where Loom writes the sender's rank (read once the work completed).
  void setSource(std::shared_ptr<int> source) { source_ = std::move(source); }
  int sourceRank() const override;

  bool isCompleted() override;
  // CUDA operations without a timeout: the caller's current stream waits, then a failure of the
  // communicator is raised (as WorkNCCL::wait does with ncclCommGetAsyncError). Otherwise, or
  // with a timeout, the host waits for completion.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void synchronize() override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
#ifdef LOOM_C10D_WORK_HAS_TIMEOUT  // setup.py: torch releases before it have no Work::getTimeout
  std::chrono::milliseconds getTimeout() const override { return timeout_; }
#endif

  // Finishes the work once: on success runs the CPU copy-backs; then marks the future and wakes
  // waiters. Later calls do nothing (the completion thread and wait() may race to it).
  void complete(std::exception_ptr error);

 private:
  void waitOnCurrentStream();
  void markFuture(std::exception_ptr error);

  std::shared_ptr<Comm> comm_;
  std::atomic<uint64_t> opId_{0};
  std::chrono::milliseconds timeout_;
  std::vector<at::Tensor> outputs_;
  std::vector<at::Tensor> keepAlive_;  // inputs and staging buffers Loom reads or writes
  std::function<void()> copyBack_;
  std::optional<StreamMark> mark_;     // CUDA operations only
  std::vector<c10::intrusive_ptr<LoomWork>> children_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::atomic<bool> finishing_{false};
  std::shared_ptr<int> source_;  // receives from any source only
};

}  // namespace loomtorch
