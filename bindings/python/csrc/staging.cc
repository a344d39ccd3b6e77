#include "staging.h"

#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>

namespace loomtorch {

at::Tensor Staging::input(const at::Tensor& t) {
  c10::NoGradGuard noGrad;
  at::Tensor buf = t.detach().contiguous();
  keepAlive_.push_back(buf);
  return buf;
}

at::Tensor Staging::output(const at::Tensor& t) {
  c10::NoGradGuard noGrad;
  if (t.is_contiguous()) {
    keepAlive_.push_back(t);
    return t;
  }
  at::Tensor buf = at::empty(t.sizes(), t.options().memory_format(at::MemoryFormat::Contiguous));
  keepAlive_.push_back(buf);
  copies_.emplace_back(t, buf);
  return buf;
}

at::Tensor Staging::inOut(const at::Tensor& t) {
  c10::NoGradGuard noGrad;
  if (t.is_contiguous()) {
    keepAlive_.push_back(t);
    return t;
  }
  at::Tensor buf = t.detach().contiguous();
  keepAlive_.push_back(buf);
  copies_.emplace_back(t, buf);
  return buf;
}

at::Tensor Staging::inputList(const std::vector<at::Tensor>& list) {
  c10::NoGradGuard noGrad;
  TORCH_CHECK(!list.empty(), "Loom: empty tensor list");
  std::vector<at::Tensor> flat;
  flat.reserve(list.size());
  for (const auto& t : list) flat.push_back(t.detach().reshape({-1}));
  at::Tensor buf = at::cat(flat);
  keepAlive_.push_back(buf);
  return buf;
}

at::Tensor Staging::outputList(const std::vector<at::Tensor>& list) {
  TORCH_CHECK(!list.empty(), "Loom: empty tensor list");
  int64_t total = 0;
  for (const auto& t : list) total += t.numel();
  at::Tensor buf = at::empty({total}, list.front().options().memory_format(at::MemoryFormat::Contiguous));
  keepAlive_.push_back(buf);
  int64_t offset = 0;
  for (const auto& t : list) {
    copies_.emplace_back(t, buf.narrow(0, offset, t.numel()));
    offset += t.numel();
  }
  return buf;
}

std::function<void()> Staging::takeCopyBack() {
  if (copies_.empty() && steps_.empty()) return nullptr;
  return [copies = std::move(copies_), steps = std::move(steps_)] {
    c10::NoGradGuard noGrad;
    for (const auto& [user, buf] : copies) user.detach().copy_(buf.view(user.sizes()));
    for (const auto& step : steps) step();
  };
}

}  // namespace loomtorch
