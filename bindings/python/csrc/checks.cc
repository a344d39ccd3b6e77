#include "checks.h"

#include <c10/util/Exception.h>

#include "loom.h"

namespace loomtorch {

namespace {

bool libraryServesCuda() {
  static const bool serves = [] {
    int kinds = 0;
    return loomGetMemoryKinds(&kinds) == loomSuccess && (kinds & LOOM_MEMORY_CUDA) != 0;
  }();
  return serves;
}

}  // namespace

void checkTensor(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.defined(), "Loom ", what, ": undefined tensor");
  TORCH_CHECK(t.layout() == at::kStrided, "Loom ", what, ": only dense tensors are supported, got ", t.layout());
  TORCH_CHECK(t.device().is_cpu() || t.device().is_cuda(), "Loom ", what, ": tensors on ", t.device(),
              " are not supported (Loom serves CPU and CUDA tensors)");
  TORCH_CHECK(!t.device().is_cuda() || libraryServesCuda(), "Loom ", what,
              ": a CUDA tensor, but the Loom library in use serves host memory only (it was built without "
              "CUDA, or finds no usable CUDA driver or device; LOOM_DEBUG=INFO says which)");
}

void checkSameShape(const at::Tensor& a, const at::Tensor& b, const char* what) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "Loom ", what, ": mismatched dtypes ", a.scalar_type(), " and ",
              b.scalar_type());
  TORCH_CHECK(a.numel() == b.numel(), "Loom ", what, ": mismatched sizes ", a.sizes(), " and ", b.sizes());
}

const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* what) {
  TORCH_CHECK(tensors.size() == 1, "Loom ", what, ": expects one tensor per call, got ", tensors.size());
  checkTensor(tensors[0], what);
  return tensors[0];
}

void checkList(const std::vector<at::Tensor>& list, const at::Tensor& like, size_t n, const char* what) {
  TORCH_CHECK(list.size() == n, "Loom ", what, ": expects a list of ", n, " tensors, got ", list.size());
  for (const auto& t : list) {
    checkTensor(t, what);
    checkSameShape(t, like, what);
  }
}

void checkPairs(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs, const char* what) {
  TORCH_CHECK(outputs.size() == inputs.size(), "Loom ", what, ": ", outputs.size(), " outputs for ", inputs.size(),
              " inputs");
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkTensor(inputs[i], what);
    checkTensor(outputs[i], what);
    TORCH_CHECK(inputs[i].scalar_type() == outputs[i].scalar_type(), "Loom ", what, ": mismatched dtypes ",
                inputs[i].scalar_type(), " and ", outputs[i].scalar_type());
  }
}

CallDevice& CallDevice::add(const at::Tensor& t) {
  checkTensor(t, what_);
  if (!device_) {
    device_ = t.device();
  } else {
    TORCH_CHECK(t.device() == *device_, "Loom ", what_, ": all tensors of one call must be on one device, got ",
                *device_, " and ", t.device());
  }
  return *this;
}

CallDevice& CallDevice::add(const std::vector<at::Tensor>& tensors) {
  for (const auto& t : tensors) add(t);
  return *this;
}

CallDevice& CallDevice::add(const std::vector<std::vector<at::Tensor>>& lists) {
  for (const auto& list : lists) add(list);
  return *this;
}

}  // namespace loomtorch
