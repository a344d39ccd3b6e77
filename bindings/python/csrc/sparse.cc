// all_reduce of a sparse COO tensor on the CPU (ReduceOp.SUM, as Gloo offers), in two Loom steps:
// an all-gather of every rank's shape and entry count, then one all-gather of every rank's indices
// and values, padded to the largest count. Each rank adds the gathered entries up itself (coalesce)
// and puts the sum in its tensor. The second step is sized by the first, so the call waits for the
// first; the Work returned is the second's.
#include <algorithm>

#include <c10/util/Exception.h>

#include "backend.h"
#include "loom_error.h"

namespace loomtorch {

using c10d::OpType;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

namespace {

constexpr int64_t kMaxDims = 64;
// One rank's record: entry count, dtype, sparse dims, dims, the sizes (unused ones -1).
constexpr int64_t kRecord = 4 + kMaxDims;

at::Tensor record(const at::Tensor& t) {
  at::Tensor rec = at::full({kRecord}, -1, at::kLong);
  auto r = rec.accessor<int64_t, 1>();
  r[0] = t._nnz();
  r[1] = static_cast<int64_t>(t.scalar_type());
  r[2] = t.sparse_dim();
  r[3] = t.dim();
  for (int64_t d = 0; d < t.dim(); ++d) r[4 + d] = t.size(d);
  return rec;
}

// `n` rows of `t` along `dim`, the rest of t's rows being padding (zeros).
at::Tensor padded(const at::Tensor& t, int64_t dim, int64_t n) {
  std::vector<int64_t> shape = t.sizes().vec();
  shape[dim] = n;
  at::Tensor out = at::zeros(shape, t.options());
  out.narrow(dim, 0, t.size(dim)).copy_(t);
  return out;
}

}  // namespace

WorkPtr LoomBackend::allreduce_sparse(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  TORCH_CHECK(tensors.size() == 1, "Loom allreduce: expects one tensor per call, got ", tensors.size());
  return allreduceSparse(tensors[0], opts);
}

WorkPtr LoomBackend::allreduceSparse(at::Tensor& t, const c10d::AllreduceOptions& opts) {
  TORCH_CHECK(t.layout() == at::kSparse, "Loom allreduce: sparse tensors must have the COO layout, got ", t.layout());
  TORCH_CHECK(t.device().is_cpu(), "Loom allreduce: sparse tensors must be on the CPU, got one on ", t.device());
  TORCH_CHECK(opts.reduceOp == c10d::ReduceOp::SUM, "Loom allreduce: sparse tensors can only be summed (ReduceOp.SUM)");
  TORCH_CHECK(t.dim() <= kMaxDims, "Loom allreduce: sparse tensors of at most ", kMaxDims, " dimensions, got ", t.dim());
  {
    std::lock_guard<std::mutex> lock(issueMutex_);
    TORCH_CHECK(!coalescing_, "Loom allreduce: a sparse all_reduce cannot join a coalescing block (its second step "
                              "is sized by the first's result)");
  }

  // Step 1: every rank's record. Ranks that disagree fail alike, since all see the same records.
  at::Tensor mine = record(t);
  at::Tensor all = at::empty({size_, kRecord}, at::kLong);
  c10d::AllgatherOptions gatherOpts;
  gatherOpts.timeout = opts.timeout;
  _allgather_base(all, mine, gatherOpts)->wait();
  std::vector<int64_t> counts(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    TORCH_CHECK(at::equal(all[r].narrow(0, 1, kRecord - 1), mine.narrow(0, 1, kRecord - 1)), "Loom allreduce: rank ", r,
                " passed a sparse tensor of another dtype, shape or number of sparse dimensions than rank ", rank_,
                "'s (", t.scalar_type(), ", ", t.sizes(), ", ", t.sparse_dim(), " sparse)");
    counts[r] = all[r][0].item<int64_t>();
  }
  const int64_t most = *std::max_element(counts.begin(), counts.end());

  // Step 2: everyone's entries, then the sum into t.
  Op op{OpType::_ALLREDUCE_SPARSE, opts.timeout, {t}, {}, {}, t.device(), {t}};
  at::Tensor indices = op.staging.input(padded(t._indices(), 1, most));
  at::Tensor values = op.staging.input(padded(t._values(), 0, most));
  std::vector<int64_t> valuesShape = values.sizes().vec();
  valuesShape.insert(valuesShape.begin(), size_);
  at::Tensor allIndices = op.staging.output(at::empty({size_, indices.size(0), most}, at::kLong));
  at::Tensor allValues = op.staging.output(at::empty(valuesShape, values.options()));
  op.staging.then([t, allIndices, allValues, counts]() mutable {
    std::vector<at::Tensor> idx, val;
    for (size_t r = 0; r < counts.size(); ++r) {
      idx.push_back(allIndices[r].narrow(1, 0, counts[r]));
      val.push_back(allValues[r].narrow(0, 0, counts[r]));
    }
    // Into t itself: a sparse tensor's indices and values are members of its own TensorImpl, which a
    // detached alias does not share.
    t.copy_(at::sparse_coo_tensor(at::cat(idx, 1), at::cat(val, 0), t.sizes(), t.options()).coalesce());
  });
  return issue(std::move(op), [&](loomComm_t comm, loomStream_t stream, RedOps&) {
    grouped([&] {
      checkCall(loomAllGather(indices.data_ptr(), allIndices.data_ptr(), indices.numel(), loomInt64, comm, stream),
                "allreduce (sparse indices)");
      LoomView v = movementView(values);
      checkCall(loomAllGather(values.data_ptr(), allValues.data_ptr(), v.count, v.type, comm, stream),
                "allreduce (sparse values)");
    });
  });
}

}  // namespace loomtorch
