// Data movement from or to every rank: broadcast, all-gathers, gather, scatter.
#include <c10/util/Exception.h>

#include "backend.h"
#include "checks.h"
#include "loom_error.h"
#include "op_names.h"

namespace loomtorch {

using c10d::OpType;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

WorkPtr LoomBackend::broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  const at::Tensor& t = single(tensors, "broadcast");
  int root = checkRoot(opts.rootRank, "broadcast");
  Op op{OpType::BROADCAST, opts.timeout, tensors, {}, {}, t.device(), tensors};
  at::Tensor buf = op.staging.inOut(t);
  LoomView v = movementView(buf);
  return issue(std::move(op), [&](loomComm_t comm, loomStream_t stream, RedOps&) {
    checkCall(loomBroadcast(buf.data_ptr(), buf.data_ptr(), v.count, v.type, root, comm, stream), "broadcast");
  });
}

WorkPtr LoomBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                               const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size() && !inputs.empty(), "Loom allgather: ", outputs.size(),
              " output lists for ", inputs.size(), " inputs");
  return allgatherPerInput(outputs, inputs, inputs.size() == 1 ? OpType::ALLGATHER : OpType::ALLGATHER_COALESCED, opts);
}

// torch's all_gather_coalesced: output_tensor_lists[r][i] is rank r's input_tensor_list[i].
WorkPtr LoomBackend::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputLists,
                                         std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(!inputs.empty(), "Loom allgather_coalesced: no input tensors");
  TORCH_CHECK(outputLists.size() == static_cast<size_t>(size_), "Loom allgather_coalesced: ", outputLists.size(),
              " output lists, expected one per rank (", size_, ")");
  std::vector<std::vector<at::Tensor>> perInput(inputs.size());
  for (size_t r = 0; r < outputLists.size(); ++r) {
    TORCH_CHECK(outputLists[r].size() == inputs.size(), "Loom allgather_coalesced: the output list for rank ", r,
                " has ", outputLists[r].size(), " tensors, expected one per input (", inputs.size(), ")");
    for (size_t i = 0; i < inputs.size(); ++i) perInput[i].push_back(outputLists[r][i]);
  }
  return allgatherPerInput(perInput, inputs, OpType::ALLGATHER_COALESCED, opts);
}

WorkPtr LoomBackend::allgatherPerInput(const std::vector<std::vector<at::Tensor>>& perInput,
                                       std::vector<at::Tensor>& inputs, OpType type,
                                       const c10d::AllgatherOptions& opts) {
  c10::Device device = CallDevice("allgather").add(inputs).add(perInput).device();
  Op op{type, opts.timeout, {}, {}, {}, device, inputs};
  std::vector<std::pair<at::Tensor, at::Tensor>> bufs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkList(perInput[i], inputs[i], static_cast<size_t>(size_), "allgather");
    bufs.emplace_back(op.staging.input(inputs[i]), op.staging.outputList(perInput[i]));
    op.outputs.insert(op.outputs.end(), perInput[i].begin(), perInput[i].end());
  }
  return issue(std::move(op), [&](loomComm_t comm, loomStream_t stream, RedOps&) {
    grouped([&] {
      for (const auto& [in, out] : bufs) {
        LoomView v = movementView(in);
        checkCall(loomAllGather(in.data_ptr(), out.data_ptr(), v.count, v.type, comm, stream), "allgather");
      }
    });
  });
}

WorkPtr LoomBackend::_allgather_base(at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  std::vector<at::Tensor> outs{output}, ins{input};
  return allgather_into_tensor_coalesced(outs, ins, opts);
}

WorkPtr LoomBackend::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) {
  checkPairs(outputs, inputs, "allgather_into_tensor");
  c10::Device device = CallDevice("allgather_into_tensor").add(outputs).add(inputs).device();
  for (size_t i = 0; i < inputs.size(); ++i)
    TORCH_CHECK(outputs[i].numel() == inputs[i].numel() * size_, "Loom allgather_into_tensor: output has ",
                outputs[i].numel(), " elements, expected ", size_, " x ", inputs[i].numel());
  Op op{inputs.size() == 1 ? OpType::_ALLGATHER_BASE : kAllGatherIntoTensorCoalesced, opts.timeout, outputs,
        {}, {}, device, inputs};
  std::vector<std::pair<at::Tensor, at::Tensor>> bufs;
  for (size_t i = 0; i < inputs.size(); ++i) bufs.emplace_back(op.staging.input(inputs[i]), op.staging.output(outputs[i]));
  return issue(std::move(op), [&](loomComm_t comm, loomStream_t stream, RedOps&) {
    grouped([&] {
      for (const auto& [in, out] : bufs) {
        LoomView v = movementView(in);
        checkCall(loomAllGather(in.data_ptr(), out.data_ptr(), v.count, v.type, comm, stream), "allgather_into_tensor");
      }
    });
  });
}

WorkPtr LoomBackend::gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                            const c10d::GatherOptions& opts) {
  const at::Tensor& in = single(inputs, "gather");
  int root = checkRoot(opts.rootRank, "gather");
  const bool isRoot = root == rank_;
  if (isRoot) {
    TORCH_CHECK(outputs.size() == 1, "Loom gather: the root expects one output list, got ", outputs.size());
    checkList(outputs[0], in, static_cast<size_t>(size_), "gather");
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                "Loom gather: only the root passes output tensors");
  }
  c10::Device device = CallDevice("gather").add(inputs).add(outputs).device();
  Op op{OpType::GATHER, opts.timeout, isRoot ? outputs[0] : std::vector<at::Tensor>{}, {}, {}, device, inputs};
  at::Tensor send = op.staging.input(in);
  at::Tensor recv = isRoot ? op.staging.outputList(outputs[0]) : at::Tensor();
  LoomView v = movementView(send);
  return issue(std::move(op), [&](loomComm_t comm, loomStream_t stream, RedOps&) {
    checkCall(loomGather(send.data_ptr(), recv.defined() ? recv.data_ptr() : nullptr, v.count, v.type, root, comm, stream),
              "gather");
  });
}

WorkPtr LoomBackend::scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                             const c10d::ScatterOptions& opts) {
  const at::Tensor& out = single(outputs, "scatter");
  int root = checkRoot(opts.rootRank, "scatter");
  const bool isRoot = root == rank_;
  if (isRoot) {
    TORCH_CHECK(inputs.size() == 1, "Loom scatter: the root expects one input list, got ", inputs.size());
    checkList(inputs[0], out, static_cast<size_t>(size_), "scatter");
  } else {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                "Loom scatter: only the root passes input tensors");
  }
  c10::Device device = CallDevice("scatter").add(outputs).add(inputs).device();
  Op op{OpType::SCATTER, opts.timeout, outputs, {}, {}, device, isRoot ? inputs[0] : outputs};
  at::Tensor send = isRoot ? op.staging.inputList(inputs[0]) : at::Tensor();
  at::Tensor recv = op.staging.output(out);
  LoomView v = movementView(recv);
  return issue(std::move(op), [&](loomComm_t comm, loomStream_t stream, RedOps&) {
    checkCall(loomScatter(send.defined() ? send.data_ptr() : nullptr, recv.data_ptr(), v.count, v.type, root, comm, stream),
              "scatter");
  });
}

}  // namespace loomtorch
