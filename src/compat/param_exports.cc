// NCCL 2.30's settings calls, answered by Loom's settings table (the same table loom-info prints).
#include "compat/exports.h"
#include "compat/last_error.h"

using namespace loom::compat;

LOOM_NCCL_EXPORT ncclResult_t pncclParamBind(ncclParamHandle_t* out, const char* key) {
  forgetError();
  return toNccl(loomParamBind(reinterpret_cast<loomParamHandle_t*>(out), key));
}
LOOM_NCCL_ALIAS(ncclParamBind)

#define LOOM_NCCL_PARAM_GETTER(Suffix, Type)                                         \
  LOOM_NCCL_EXPORT ncclResult_t pncclParamGet##Suffix(ncclParamHandle_t h, Type* out) { \
    forgetError();                                                                   \
    return toNccl(loomParamGet##Suffix(toLoom(h), out));                             \
  }                                                                                  \
  LOOM_NCCL_ALIAS(ncclParamGet##Suffix)

LOOM_NCCL_PARAM_GETTER(I8, int8_t)
LOOM_NCCL_PARAM_GETTER(I16, int16_t)
LOOM_NCCL_PARAM_GETTER(I32, int32_t)
LOOM_NCCL_PARAM_GETTER(I64, int64_t)
LOOM_NCCL_PARAM_GETTER(U8, uint8_t)
LOOM_NCCL_PARAM_GETTER(U16, uint16_t)
LOOM_NCCL_PARAM_GETTER(U32, uint32_t)
LOOM_NCCL_PARAM_GETTER(U64, uint64_t)
LOOM_NCCL_PARAM_GETTER(Str, const char*)

LOOM_NCCL_EXPORT ncclResult_t pncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len) {
  forgetError();
  return toNccl(loomParamGet(toLoom(h), out, maxLen, len));
}
LOOM_NCCL_ALIAS(ncclParamGet)

LOOM_NCCL_EXPORT ncclResult_t pncclParamGetParameter(const char* key, const char** value, int* valueLen) {
  forgetError();
  return toNccl(loomParamGetParameter(key, value, valueLen));
}
LOOM_NCCL_ALIAS(ncclParamGetParameter)

LOOM_NCCL_EXPORT ncclResult_t pncclParamGetAllParameterKeys(const char*** table, int* tableLen) {
  forgetError();
  return toNccl(loomParamGetAllParameterKeys(table, tableLen));
}
LOOM_NCCL_ALIAS(ncclParamGetAllParameterKeys)

LOOM_NCCL_EXPORT void pncclParamDumpAll(void) { loomParamDumpAll(); }
LOOM_NCCL_ALIAS(ncclParamDumpAll)

#undef LOOM_NCCL_PARAM_GETTER  // unity builds: the sources compiled after this one do not see it
