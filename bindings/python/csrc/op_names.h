// Names of torch's operation types: in error messages ("barrier (operation 7)") and as the titles
// of the profiler events every operation records ("loom:all_reduce"), the way Gloo's are named
// "gloo:<op>", so that tools and tests that look for "<backend>:<op>" find Loom's too.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

namespace loomtorch {

// The operation types of the coalesced tensor collectives; torch releases before they existed
// (setup.py tells) counted them as COALESCED.
#ifdef LOOM_C10D_TENSOR_COALESCED_OPS
inline constexpr c10d::OpType kAllGatherIntoTensorCoalesced = c10d::OpType::ALLGATHER_INTO_TENSOR_COALESCED;
inline constexpr c10d::OpType kReduceScatterTensorCoalesced = c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED;
#else
inline constexpr c10d::OpType kAllGatherIntoTensorCoalesced = c10d::OpType::COALESCED;
inline constexpr c10d::OpType kReduceScatterTensorCoalesced = c10d::OpType::COALESCED;
#endif

// torch.distributed's name of the operation: "all_reduce", "all_gather_into_tensor", ...
const char* opName(c10d::OpType type);
// "loom:" + opName(type); a string that lives for the whole run, as the profiler requires.
const char* profilingTitle(c10d::OpType type);

}  // namespace loomtorch
