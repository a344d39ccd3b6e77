// Buffers Loom can use for torch tensors: Loom wants one contiguous buffer per argument, so
// non-contiguous tensors and tensor lists get a contiguous stand-in, copied in when the call is
// issued and copied back when the operation completed (CPU) or, for CUDA tensors, enqueued right
// after the Loom call on the same stream. Either way the copies run where torch puts work for the
// tensors' device: for CUDA, its current stream, which is the one the call hands Loom.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

namespace loomtorch {

class Staging {
 public:
  // Loom reads t.
  at::Tensor input(const at::Tensor& t);
  // Loom writes t.
  at::Tensor output(const at::Tensor& t);
  // Loom reads and writes t (in-place collectives).
  at::Tensor inOut(const at::Tensor& t);
  // Loom reads the tensors of `list` back to back.
  at::Tensor inputList(const std::vector<at::Tensor>& list);
  // Loom writes the tensors of `list` back to back.
  at::Tensor outputList(const std::vector<at::Tensor>& list);

  // Host work on Loom's results before the operation counts as done, after the copies back (CPU
  // operations only: it runs when the Work completes).
  void then(std::function<void()> step) { steps_.push_back(std::move(step)); }

  // What the Work keeps alive, and the copies back to the user's tensors (LoomWork runs them).
  std::vector<at::Tensor> takeKeepAlive() { return std::move(keepAlive_); }
  std::function<void()> takeCopyBack();

 private:
  std::vector<at::Tensor> keepAlive_;
  std::vector<std::pair<at::Tensor, at::Tensor>> copies_;  // (user tensor, Loom's buffer)
  std::vector<std::function<void()>> steps_;
};

}  // namespace loomtorch
