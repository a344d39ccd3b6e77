// Data types and reduction operators as loom-perf names and reasons about them (nccl-tests' names).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "loom.h"

namespace loomperf {

// PreMulSum is a custom operator made per communicator; None marks collectives that only move data.
enum class RedOp { Sum, Prod, Max, Min, Avg, PreMulSum, None };

struct DataTypeInfo {
  loomDataType_t type;
  const char* name;
  size_t size;
  bool isFloat;
  bool isSigned;
  // Every integer in [-maxExact, maxExact] (or [0, maxExact] unsigned) is exact in this type and,
  // for integer types, differs from the poison value loom-perf writes into output buffers.
  double maxExact;
  // 2^maxPow2Exp is finite (exact) in this type.
  int maxPow2Exp;
};

const DataTypeInfo& dataTypeInfo(loomDataType_t type);
const std::vector<loomDataType_t>& allDataTypes();
std::optional<loomDataType_t> parseDataType(std::string_view name);
std::vector<std::string> dataTypeNames();  // accepted spellings, for --help and validation

const char* redOpName(RedOp op);
const std::vector<RedOp>& allRedOps();  // what "-o all" runs
std::optional<RedOp> parseRedOp(std::string_view name);
std::vector<std::string> redOpNames();

}  // namespace loomperf
