// How torch tensors and reduce operators map onto Loom's datatypes and operators.
#pragma once

#include <cstddef>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <loom.h>

namespace loomtorch {

// A buffer as Loom sees it: datatype and element count.
struct LoomView {
  loomDataType_t type;
  size_t count;
};

// For reductions: the tensor's own Loom datatype (bool as uint8); refuses types Loom cannot add.
LoomView reductionView(const at::Tensor& t, const char* what);

// For data movement (broadcast, gathers, all-to-all, send/recv): any dense dtype works, since
// types Loom has no name for travel as bytes.
LoomView movementView(const at::Tensor& t);

// Custom operators made for one call; destroyed when the calls that use them were issued.
class RedOps {
 public:
  RedOps() = default;
  RedOps(RedOps&&) noexcept = default;
  RedOps& operator=(RedOps&&) noexcept;
  RedOps(const RedOps&) = delete;
  ~RedOps();
  void add(loomRedOp_t op, loomComm_t comm);
  void append(RedOps&& other);
  void release();

 private:
  std::vector<std::pair<loomRedOp_t, loomComm_t>> ops_;
};

// torch's ReduceOp for a tensor of this dtype as a Loom operator. PREMUL_SUM makes a custom
// operator (kept alive by `keep`); bool maps SUM/BOR to MAX and PRODUCT/BAND to MIN, as NCCL does.
loomRedOp_t loomRedOp(const c10d::ReduceOp& op, const at::Tensor& t, loomComm_t comm, RedOps* keep);

}  // namespace loomtorch
