#include "op_names.h"

namespace loomtorch {

// One list, so that both names of an operation always agree. The names are those of the
// torch.distributed functions that issue each type.
#define LOOM_OP_NAMES(X)                                                  \
  X(BROADCAST, "broadcast")                                               \
  X(ALLREDUCE, "all_reduce")                                              \
  X(ALLREDUCE_COALESCED, "all_reduce_coalesced")                          \
  X(_ALLREDUCE_SPARSE, "all_reduce_sparse")                               \
  X(REDUCE, "reduce")                                                     \
  X(ALLGATHER, "all_gather")                                              \
  X(_ALLGATHER_BASE, "all_gather_into_tensor")                            \
  X(ALLGATHER_COALESCED, "all_gather_coalesced")                          \
  X(GATHER, "gather")                                                     \
  X(SCATTER, "scatter")                                                   \
  X(REDUCE_SCATTER, "reduce_scatter")                                     \
  X(_REDUCE_SCATTER_BASE, "reduce_scatter_tensor")                        \
  X(ALLTOALL_BASE, "all_to_all_single")                                   \
  X(ALLTOALL, "all_to_all")                                               \
  X(SEND, "send")                                                         \
  X(RECV, "recv")                                                         \
  X(RECVANYSOURCE, "recvAnySource") /* Gloo's event name; torch's suite expects <backend>:recvAnySource */ \
  X(BARRIER, "barrier")                                                   \
  X(COALESCED, "coalesced")
#ifdef LOOM_C10D_TENSOR_COALESCED_OPS
#define LOOM_TENSOR_COALESCED_NAMES(X)                                   \
  X(ALLGATHER_INTO_TENSOR_COALESCED, "all_gather_into_tensor_coalesced") \
  X(REDUCE_SCATTER_TENSOR_COALESCED, "reduce_scatter_tensor_coalesced")
#else
#define LOOM_TENSOR_COALESCED_NAMES(X)
#endif

const char* opName(c10d::OpType type) {
  switch (type) {
#define LOOM_NAME_CASE(type, name) \
  case c10d::OpType::type:         \
    return name;
    LOOM_OP_NAMES(LOOM_NAME_CASE)
    LOOM_TENSOR_COALESCED_NAMES(LOOM_NAME_CASE)
#undef LOOM_NAME_CASE
    default:
      return "operation";
  }
}

const char* profilingTitle(c10d::OpType type) {
  switch (type) {
#define LOOM_TITLE_CASE(type, name) \
  case c10d::OpType::type:          \
    return "loom:" name;
    LOOM_OP_NAMES(LOOM_TITLE_CASE)
    LOOM_TENSOR_COALESCED_NAMES(LOOM_TITLE_CASE)
#undef LOOM_TITLE_CASE
    default:
      return "loom:operation";
  }
}

}  // namespace loomtorch
