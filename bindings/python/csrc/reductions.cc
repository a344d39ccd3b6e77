// Reductions: allreduce (single and coalesced), reduce, reduce-scatter (list, tensor, coalesced).
#include <c10/util/Exception.h>

#include "backend.h"
#include "checks.h"
#include "loom_error.h"
#include "op_names.h"

namespace loomtorch {

using c10d::OpType;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

WorkPtr LoomBackend::allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  if (tensors.size() == 1 && tensors[0].defined() && tensors[0].is_sparse()) return allreduceSparse(tensors[0], opts);
  const at::Tensor& t = single(tensors, "allreduce");
  Op op{OpType::ALLREDUCE, opts.timeout, tensors, {}, {}, t.device(), tensors};
  at::Tensor buf = op.staging.inOut(t);
  LoomView v = reductionView(buf, "allreduce");
  return issue(std::move(op), [&](loomComm_t comm, loomStream_t stream, RedOps& redOps) {
    loomRedOp_t red = loomRedOp(opts.reduceOp, buf, comm, &redOps);
    checkCall(loomAllReduce(buf.data_ptr(), buf.data_ptr(), v.count, v.type, red, comm, stream), "allreduce");
  });
}

WorkPtr LoomBackend::allreduce_coalesced(std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "Loom allreduce_coalesced: no tensors");
  c10::Device device = CallDevice("allreduce_coalesced").add(tensors).device();
  Op op{OpType::ALLREDUCE_COALESCED, opts.timeout, tensors, {}, {}, device, tensors};
  std::vector<at::Tensor> bufs;
  for (const auto& t : tensors) bufs.push_back(op.staging.inOut(t));
  return issue(std::move(op), [&](loomComm_t comm, loomStream_t stream, RedOps& redOps) {
    grouped([&] {
      for (const auto& buf : bufs) {
        LoomView v = reductionView(buf, "allreduce_coalesced");
        loomRedOp_t red = loomRedOp(opts.reduceOp, buf, comm, &redOps);
        checkCall(loomAllReduce(buf.data_ptr(), buf.data_ptr(), v.count, v.type, red, comm, stream),
                  "allreduce_coalesced");
      }
    });
  });
}

WorkPtr LoomBackend::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  const at::Tensor& t = single(tensors, "reduce");
  int root = checkRoot(opts.rootRank, "reduce");
  Op op{OpType::REDUCE, opts.timeout, tensors, {}, {}, t.device(), tensors};
  at::Tensor buf = op.staging.inOut(t);
  LoomView v = reductionView(buf, "reduce");
  return issue(std::move(op), [&](loomComm_t comm, loomStream_t stream, RedOps& redOps) {
    loomRedOp_t red = loomRedOp(opts.reduceOp, buf, comm, &redOps);
    checkCall(loomReduce(buf.data_ptr(), buf.data_ptr(), v.count, v.type, red, root, comm, stream), "reduce");
  });
}

WorkPtr LoomBackend::reduce_scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                    const c10d::ReduceScatterOptions& opts) {
  const at::Tensor& out = single(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1, "Loom reduce_scatter: expects one input list, got ", inputs.size());
  checkList(inputs[0], out, static_cast<size_t>(size_), "reduce_scatter");
  c10::Device device = CallDevice("reduce_scatter").add(outputs).add(inputs).device();
  Op op{OpType::REDUCE_SCATTER, opts.timeout, outputs, {}, {}, device, inputs[0]};
  at::Tensor in = op.staging.inputList(inputs[0]);
  at::Tensor buf = op.staging.output(out);
  LoomView v = reductionView(buf, "reduce_scatter");
  return issue(std::move(op), [&](loomComm_t comm, loomStream_t stream, RedOps& redOps) {
    loomRedOp_t red = loomRedOp(opts.reduceOp, buf, comm, &redOps);
    checkCall(loomReduceScatter(in.data_ptr(), buf.data_ptr(), v.count, v.type, red, comm, stream), "reduce_scatter");
  });
}

WorkPtr LoomBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  std::vector<at::Tensor> outs{output}, ins{input};
  return reduce_scatter_tensor_coalesced(outs, ins, opts);
}

WorkPtr LoomBackend::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                                     const c10d::ReduceScatterOptions& opts) {
  checkPairs(outputs, inputs, "reduce_scatter_tensor");
  c10::Device device = CallDevice("reduce_scatter_tensor").add(outputs).add(inputs).device();
  for (size_t i = 0; i < inputs.size(); ++i)
    TORCH_CHECK(inputs[i].numel() == outputs[i].numel() * size_, "Loom reduce_scatter_tensor: input has ",
                inputs[i].numel(), " elements, expected ", size_, " x ", outputs[i].numel());
  Op op{inputs.size() == 1 ? OpType::_REDUCE_SCATTER_BASE : kReduceScatterTensorCoalesced, opts.timeout,
        outputs, {}, {}, device, inputs};
  std::vector<std::pair<at::Tensor, at::Tensor>> bufs;
  for (size_t i = 0; i < inputs.size(); ++i) bufs.emplace_back(op.staging.input(inputs[i]), op.staging.output(outputs[i]));
  return issue(std::move(op), [&](loomComm_t comm, loomStream_t stream, RedOps& redOps) {
    grouped([&] {
      for (const auto& [in, out] : bufs) {
        LoomView v = reductionView(out, "reduce_scatter_tensor");
        loomRedOp_t red = loomRedOp(opts.reduceOp, out, comm, &redOps);
        checkCall(loomReduceScatter(in.data_ptr(), out.data_ptr(), v.count, v.type, red, comm, stream),
                  "reduce_scatter_tensor");
      }
    });
  });
}

}  // namespace loomtorch
