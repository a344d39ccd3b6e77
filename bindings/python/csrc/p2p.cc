// All-to-all (equal splits through loomAlltoAll, anything else as one Loom group of sends and
// receives) and send/recv.
#include <c10/util/Exception.h>

#include "backend.h"
#include "work.h"
#include "checks.h"
#include "loom_error.h"

namespace loomtorch {

using c10d::OpType;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

namespace {

// Elements per peer from torch's split sizes (rows of dim 0); empty splits mean equal parts.
std::vector<int64_t> elementCounts(const at::Tensor& t, const std::vector<int64_t>& splits, int size, const char* side) {
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  const int64_t perRow = rows == 0 ? 0 : t.numel() / rows;
  std::vector<int64_t> counts(static_cast<size_t>(size));
  if (splits.empty()) {
    TORCH_CHECK(rows % size == 0, "Loom alltoall_base: ", side, " dim 0 (", rows, ") is not divisible by the group size ",
                size);
    for (auto& c : counts) c = rows / size * perRow;
    return counts;
  }
  TORCH_CHECK(static_cast<int>(splits.size()) == size, "Loom alltoall_base: ", splits.size(), " ", side,
              " split sizes for a group of ", size);
  int64_t total = 0;
  for (int i = 0; i < size; ++i) {
    TORCH_CHECK(splits[i] >= 0, "Loom alltoall_base: negative split size ", splits[i]);
    counts[i] = splits[i] * perRow;
    total += splits[i];
  }
  TORCH_CHECK(total == rows, "Loom alltoall_base: ", side, " split sizes add up to ", total, " but dim 0 is ", rows);
  return counts;
}

bool allEqual(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != a[0] || b[i] != a[0]) return false;
  return true;
}

// Sends part i of `send` to rank i and receives part i of `recv` from rank i (counts in elements
// of `elemBytes`), moved as bytes, inside the caller's Loom group.
void exchange(const at::Tensor& send, const std::vector<int64_t>& sendCounts, const at::Tensor& recv,
              const std::vector<int64_t>& recvCounts, size_t elemBytes, loomComm_t comm, loomStream_t stream) {
  auto* in = static_cast<const char*>(send.data_ptr());
  auto* out = static_cast<char*>(recv.data_ptr());
  size_t sendOff = 0, recvOff = 0;
  for (size_t peer = 0; peer < sendCounts.size(); ++peer) {
    size_t sendBytes = static_cast<size_t>(sendCounts[peer]) * elemBytes;
    size_t recvBytes = static_cast<size_t>(recvCounts[peer]) * elemBytes;
    if (sendBytes) checkCall(loomSend(in + sendOff, sendBytes, loomUint8, static_cast<int>(peer), comm, stream), "alltoall");
    if (recvBytes) checkCall(loomRecv(out + recvOff, recvBytes, loomUint8, static_cast<int>(peer), comm, stream), "alltoall");
    sendOff += sendBytes;
    recvOff += recvBytes;
  }
}

}  // namespace

WorkPtr LoomBackend::alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& outputSplits,
                                   std::vector<int64_t>& inputSplits, const c10d::AllToAllOptions& opts) {
  c10::Device device = CallDevice("alltoall_base").add(input).add(output).device();
  TORCH_CHECK(input.scalar_type() == output.scalar_type(), "Loom alltoall_base: mismatched dtypes ",
              input.scalar_type(), " and ", output.scalar_type());
  auto sendCounts = elementCounts(input, inputSplits, size_, "input");
  auto recvCounts = elementCounts(output, outputSplits, size_, "output");
  Op op{OpType::ALLTOALL_BASE, opts.timeout, {output}, {}, {}, device, {input}};
  at::Tensor in = op.staging.input(input);
  at::Tensor out = op.staging.output(output);
  if (allEqual(sendCounts, recvCounts)) {
    LoomView v = movementView(in);
    size_t perPeer = v.count / static_cast<size_t>(size_);
    return issue(std::move(op), [&](loomComm_t comm, loomStream_t stream, RedOps&) {
      checkCall(loomAlltoAll(in.data_ptr(), out.data_ptr(), perPeer, v.type, comm, stream), "alltoall_base");
    });
  }
  return issue(std::move(op), [&](loomComm_t comm, loomStream_t stream, RedOps&) {
    grouped([&] { exchange(in, sendCounts, out, recvCounts, in.element_size(), comm, stream); });
  });
}

WorkPtr LoomBackend::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                              const c10d::AllToAllOptions& opts) {
  TORCH_CHECK(static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_,
              "Loom alltoall: expects ", size_, " input and output tensors, got ", inputs.size(), " and ", outputs.size());
  c10::Device device = CallDevice("alltoall").add(inputs).add(outputs).device();
  std::vector<int64_t> sendCounts, recvCounts;
  for (int i = 0; i < size_; ++i) {
    TORCH_CHECK(inputs[i].scalar_type() == inputs[0].scalar_type() && outputs[i].scalar_type() == inputs[0].scalar_type(),
                "Loom alltoall: all tensors must have one dtype");
    sendCounts.push_back(inputs[i].numel());
    recvCounts.push_back(outputs[i].numel());
  }
  Op op{OpType::ALLTOALL, opts.timeout, outputs, {}, {}, device, inputs};
  at::Tensor in = op.staging.inputList(inputs);
  at::Tensor out = op.staging.outputList(outputs);
  if (allEqual(sendCounts, recvCounts)) {
    LoomView v = movementView(in);
    size_t perPeer = v.count / static_cast<size_t>(size_);
    return issue(std::move(op), [&](loomComm_t comm, loomStream_t stream, RedOps&) {
      checkCall(loomAlltoAll(in.data_ptr(), out.data_ptr(), perPeer, v.type, comm, stream), "alltoall");
    });
  }
  return issue(std::move(op), [&](loomComm_t comm, loomStream_t stream, RedOps&) {
    grouped([&] { exchange(in, sendCounts, out, recvCounts, in.element_size(), comm, stream); });
  });
}

WorkPtr LoomBackend::send(std::vector<at::Tensor>& tensors, int dstRank, int /*tag: Loom orders by peer*/) {
  const at::Tensor& t = single(tensors, "send");
  Op op{OpType::SEND, c10d::kUnsetTimeout, tensors, {}, {}, t.device(), tensors};
  at::Tensor buf = op.staging.input(t);
  LoomView v = movementView(buf);
  return issue(std::move(op), [&](loomComm_t comm, loomStream_t stream, RedOps&) {
    checkCall(loomSend(buf.data_ptr(), v.count, v.type, dstRank, comm, stream), "send");
  });
}

WorkPtr LoomBackend::recv(std::vector<at::Tensor>& tensors, int srcRank, int /*tag: Loom orders by peer*/) {
  const at::Tensor& t = single(tensors, "recv");
  Op op{OpType::RECV, c10d::kUnsetTimeout, tensors, {}, {}, t.device(), tensors};
  at::Tensor buf = op.staging.output(t);
  LoomView v = movementView(buf);
  return issue(std::move(op), [&](loomComm_t comm, loomStream_t stream, RedOps&) {
    checkCall(loomRecv(buf.data_ptr(), v.count, v.type, srcRank, comm, stream), "recv");
  });
}

// recv without src: loomRecvAny takes the next message of whichever rank sends first; the Work's
// sourceRank() names that rank once it completed.
WorkPtr LoomBackend::recvAnysource(std::vector<at::Tensor>& tensors, int /*tag: Loom orders by peer*/) {
  const at::Tensor& t = single(tensors, "recv");
  Op op{OpType::RECVANYSOURCE, c10d::kUnsetTimeout, tensors, {}, {}, t.device(), tensors};
  at::Tensor buf = op.staging.output(t);
  LoomView v = movementView(buf);
  auto source = std::make_shared<int>(-1);
  WorkPtr work = issue(std::move(op), [&](loomComm_t comm, loomStream_t stream, RedOps&) {
    checkCall(loomRecvAny(buf.data_ptr(), v.count, v.type, source.get(), comm, stream), "recv");
  });
  static_cast<LoomWork*>(work.get())->setSource(std::move(source));
  return work;
}

}  // namespace loomtorch
