// The Work handed back for every operation: completes when loomCommWaitOp says its operation (and
// everything the communicator accepted before it) is done, then runs its copy-backs (staged
// outputs) and marks its future, whose value is the list of output tensors.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "comm.h"

namespace loomtorch {

class LoomWork : public c10d::Work {
 public:
  LoomWork(std::shared_ptr<Comm> comm, c10d::OpType type, std::chrono::milliseconds timeout,
           std::vector<at::Tensor> outputs, std::vector<at::Tensor> keepAlive, std::function<void()> onSuccess);

  // The Loom operation id to wait for; unknown (0) while the op sits in an open coalescing group.
  void assignOpId(uint64_t id) { opId_.store(id); }
  uint64_t opId() const { return opId_.load(); }
  // Works completed (with their copy-backs) before this one completes: the ops of a coalesced block.
  void addChild(c10::intrusive_ptr<LoomWork> child) { children_.push_back(std::move(child)); }
  const std::vector<at::Tensor>& outputs() const { return outputs_; }

  bool isCompleted() override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void synchronize() override {}
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  std::chrono::milliseconds getTimeout() const override { return timeout_; }

  // Finishes the work once: on success runs the copy-backs; then wakes waiters and marks the
  // future. Later calls do nothing (the completion thread and wait() may race to it).
  void complete(std::exception_ptr error);

 private:
  std::shared_ptr<Comm> comm_;
  std::atomic<uint64_t> opId_{0};
  std::chrono::milliseconds timeout_;
  std::vector<at::Tensor> outputs_;
  std::vector<at::Tensor> keepAlive_;  // inputs and staging buffers Loom reads or writes
  std::function<void()> onSuccess_;
  std::vector<c10::intrusive_ptr<LoomWork>> children_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::atomic<bool> finishing_{false};
};

}  // namespace loomtorch
