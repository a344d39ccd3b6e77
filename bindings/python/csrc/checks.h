// Argument checks shared by the operations (Loom checks roots, peers and counts itself).
#pragma once

#include <vector>

#include <ATen/ATen.h>

namespace loomtorch {

// Refuses what Loom cannot serve yet (sparse tensors, devices other than CPU).
void checkTensor(const at::Tensor& t, const char* what);
void checkSameShape(const at::Tensor& a, const at::Tensor& b, const char* what);
// The one tensor of a single-device call.
const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* what);
// n tensors of the dtype and element count of `like`.
void checkList(const std::vector<at::Tensor>& list, const at::Tensor& like, size_t n, const char* what);
// Pairs of (output, input) of coalesced calls.
void checkPairs(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs, const char* what);

}  // namespace loomtorch
