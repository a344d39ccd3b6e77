// How the drop-in exports a function as NCCL does: a strong `pnccl` symbol (what profilers and
// wrappers that interpose on `ncclX` call through) and a weak `nccl` alias of it, both visible while
// everything else in the library stays hidden.
#pragma once

#include <cstring>

#include "compat/nccl_abi.h"
#include "loom.h"

#define LOOM_NCCL_EXPORT extern "C" __attribute__((visibility("default")))

// After the definition of p<name>: `LOOM_NCCL_ALIAS(ncclAllReduce)`.
#define LOOM_NCCL_ALIAS(name) \
  extern "C" __attribute__((visibility("default"), weak, alias("p" #name))) decltype(p##name) name;

namespace loom::compat {

// NCCL's and Loom's codes, types and handles are the same values (tests/compat/abi_test.cc).
inline ncclResult_t toNccl(loomResult_t r) { return static_cast<ncclResult_t>(r); }
inline loomComm_t toLoom(ncclComm_t c) { return reinterpret_cast<loomComm_t>(c); }
inline ncclComm_t toNccl(loomComm_t c) { return reinterpret_cast<ncclComm_t>(c); }
inline loomDataType_t toLoom(ncclDataType_t t) { return static_cast<loomDataType_t>(t); }
inline loomRedOp_t toLoom(ncclRedOp_t op) { return static_cast<loomRedOp_t>(op); }
inline loomStream_t toLoom(cudaStream_t s) { return reinterpret_cast<loomStream_t>(s); }
inline loomParamHandle_t toLoom(ncclParamHandle_t h) { return reinterpret_cast<loomParamHandle_t>(h); }
inline loomUniqueId toLoom(const ncclUniqueId& id) {
  static_assert(sizeof(loomUniqueId) == sizeof(ncclUniqueId));
  loomUniqueId out;
  std::memcpy(&out, &id, sizeof out);
  return out;
}

}  // namespace loom::compat
