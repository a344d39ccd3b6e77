// Argument checks shared by the operations (Loom checks roots, peers and counts itself).
#pragma once

#include <optional>
#include <vector>

#include <ATen/ATen.h>

namespace loomtorch {

// Refuses what Loom cannot serve (sparse tensors, devices other than CPU and CUDA, CUDA tensors when
// the library in use has no CUDA: it would read their device pointers as host memory).
void checkTensor(const at::Tensor& t, const char* what);
void checkSameShape(const at::Tensor& a, const at::Tensor& b, const char* what);
// The one tensor of a single-device call.
const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* what);
// n tensors of the dtype and element count of `like`.
void checkList(const std::vector<at::Tensor>& list, const at::Tensor& like, size_t n, const char* what);
// Pairs of (output, input) of coalesced calls.
void checkPairs(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs, const char* what);

// The device one call runs on. A call hands Loom one stream (CUDA) or none (CPU), so all its
// tensors must share one device: every tensor added is checked (checkTensor) and must be on the
// device of the first.
class CallDevice {
 public:
  explicit CallDevice(const char* what) : what_(what) {}
  CallDevice& add(const at::Tensor& t);
  CallDevice& add(const std::vector<at::Tensor>& tensors);
  CallDevice& add(const std::vector<std::vector<at::Tensor>>& lists);
  // The CPU for a call without tensors.
  c10::Device device() const { return device_.value_or(c10::Device(c10::kCPU)); }

 private:
  const char* what_;
  std::optional<c10::Device> device_;
};

}  // namespace loomtorch
