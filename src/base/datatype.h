// Facts about loomDataType_t and loomRedOp_t that every layer needs (sizes, names, validity).
#pragma once

#include <cstddef>
#include <cstdint>

#include "loom.h"

namespace loom {

inline bool isValidDataType(int dtype) { return dtype >= 0 && dtype < loomNumTypes; }

inline size_t dataTypeSize(loomDataType_t dtype) {
  switch (dtype) {
    case loomInt8:
    case loomUint8:
    case loomFloat8e4m3:
    case loomFloat8e5m2:
      return 1;
    case loomFloat16:
    case loomBfloat16:
      return 2;
    case loomInt32:
    case loomUint32:
    case loomFloat32:
      return 4;
    case loomInt64:
    case loomUint64:
    case loomFloat64:
      return 8;
    default:
      return 0;
  }
}

inline bool isFloatingType(loomDataType_t dtype) {
  switch (dtype) {
    case loomFloat16:
    case loomFloat32:
    case loomFloat64:
    case loomBfloat16:
    case loomFloat8e4m3:
    case loomFloat8e5m2:
      return true;
    default:
      return false;
  }
}

// nccl-tests' short names, used by loom-perf and in messages.
inline const char* dataTypeName(loomDataType_t dtype) {
  static const char* const names[] = {"int8",   "uint8",  "int32", "uint32", "int64", "uint64",
                                      "half",   "float",  "double", "bfloat16", "f8e4m3", "f8e5m2"};
  return isValidDataType(dtype) ? names[dtype] : "invalid";
}

inline const char* redOpName(int op) {
  static const char* const names[] = {"sum", "prod", "max", "min", "avg"};
  if (op >= 0 && op < loomNumOps) return names[op];
  return "premulsum";
}

}  // namespace loom
