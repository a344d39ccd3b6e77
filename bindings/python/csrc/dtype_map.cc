#include "dtype_map.h"

#include <cstring>
#include <optional>

#include "loom_error.h"

namespace loomtorch {

namespace {

std::optional<loomDataType_t> loomTypeOf(at::ScalarType st) {
  switch (st) {
    case at::kFloat: return loomFloat32;
    case at::kDouble: return loomFloat64;
    case at::kHalf: return loomFloat16;
    case at::kBFloat16: return loomBfloat16;
    case at::kChar: return loomInt8;
    case at::kByte: return loomUint8;
    case at::kBool: return loomUint8;
    case at::kInt: return loomInt32;
    case at::kLong: return loomInt64;
    case at::kUInt32: return loomUint32;
    case at::kUInt64: return loomUint64;
    case at::kFloat8_e4m3fn: return loomFloat8e4m3;
    case at::kFloat8_e5m2: return loomFloat8e5m2;
    default: return std::nullopt;
  }
}

const char* opName(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

loomRedOp_t preMulSum(const c10d::ReduceOp& op, const at::Tensor& t, loomComm_t comm, RedOps* keep) {
  // setup.py names the holder this torch has.
  auto* supplement = dynamic_cast<c10d::LOOM_C10D_PREMUL_SUPPLEMENT*>(op.supplement_.get());
  TORCH_CHECK(supplement != nullptr, "Loom: PREMUL_SUM without its factor");
  // The factor in the tensor's own dtype, converted by torch.
  at::Tensor factor = supplement->tensor_factor.defined()
                          ? supplement->tensor_factor.detach().to(at::kCPU, t.scalar_type()).reshape({})
                          : at::scalar_tensor(supplement->double_factor, at::TensorOptions().dtype(t.scalar_type()));
  unsigned char scalar[16] = {0};
  std::memcpy(scalar, factor.data_ptr(), factor.element_size());
  loomRedOp_t custom;
  checkCall(loomRedOpCreatePreMulSum(&custom, scalar, reductionView(t, "PREMUL_SUM").type, loomScalarHostImmediate, comm),
            "loomRedOpCreatePreMulSum");
  keep->add(custom, comm);
  return custom;
}

}  // namespace

LoomView reductionView(const at::Tensor& t, const char* what) {
  auto type = loomTypeOf(t.scalar_type());
  TORCH_CHECK(type.has_value(), "Loom ", what, ": tensors of dtype ", t.scalar_type(), " cannot be reduced");
  return {*type, static_cast<size_t>(t.numel())};
}

LoomView movementView(const at::Tensor& t) {
  if (auto type = loomTypeOf(t.scalar_type())) return {*type, static_cast<size_t>(t.numel())};
  return {loomUint8, static_cast<size_t>(t.numel()) * t.element_size()};
}

loomRedOp_t loomRedOp(const c10d::ReduceOp& op, const at::Tensor& t, loomComm_t comm, RedOps* keep) {
  const bool isBool = t.scalar_type() == at::kBool;
  const bool isIntegral = at::isIntegralType(t.scalar_type(), /*includeBool=*/true);
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return isBool ? loomMax : loomSum;
    case c10d::ReduceOp::PRODUCT: return isBool ? loomMin : loomProd;
    case c10d::ReduceOp::MIN: return loomMin;
    case c10d::ReduceOp::MAX: return loomMax;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(!isBool, "Loom: ReduceOp.AVG is not defined for bool tensors");
      return loomAvg;
    case c10d::ReduceOp::BAND:
      if (isBool) return loomMin;
      break;
    case c10d::ReduceOp::BOR:
      if (isBool) return loomMax;
      break;
    case c10d::ReduceOp::PREMUL_SUM:
      TORCH_CHECK(!isBool, "Loom: ReduceOp.PREMUL_SUM is not defined for bool tensors");
      return preMulSum(op, t, comm, keep);
    default: break;
  }
  TORCH_CHECK(false, "Loom does not support ReduceOp.", opName(op.op_), " on ", t.scalar_type(),
              isIntegral ? " tensors (Loom has no bitwise reductions)" : " tensors");
}

RedOps& RedOps::operator=(RedOps&& other) noexcept {
  release();
  ops_ = std::move(other.ops_);
  other.ops_.clear();
  return *this;
}

RedOps::~RedOps() { release(); }

void RedOps::add(loomRedOp_t op, loomComm_t comm) { ops_.emplace_back(op, comm); }

void RedOps::append(RedOps&& other) {
  ops_.insert(ops_.end(), other.ops_.begin(), other.ops_.end());
  other.ops_.clear();
}

void RedOps::release() {
  // The scalar was copied into the plan when the call was issued, so the operator may go now.
  for (auto& [op, comm] : ops_) loomRedOpDestroy(op, comm);
  ops_.clear();
}

}  // namespace loomtorch
