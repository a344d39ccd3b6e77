#include "types.h"

#include <array>

namespace loomperf {
namespace {

constexpr double k2p53 = 9007199254740992.0;

// Indexed by loomDataType_t.
const std::array<DataTypeInfo, loomNumTypes> kTypes = {{
    {loomInt8, "int8", 1, false, true, 127, 6},
    {loomUint8, "uint8", 1, false, false, 254, 7},
    {loomInt32, "int32", 4, false, true, 2147483647.0, 30},
    {loomUint32, "uint32", 4, false, false, 4294967294.0, 31},
    {loomInt64, "int64", 8, false, true, k2p53, 62},
    {loomUint64, "uint64", 8, false, false, k2p53, 63},
    {loomFloat16, "half", 2, true, true, 2048, 15},
    {loomFloat32, "float", 4, true, true, 16777216.0, 127},
    {loomFloat64, "double", 8, true, true, k2p53, 1023},
    {loomBfloat16, "bfloat16", 2, true, true, 256, 127},
    {loomFloat8e4m3, "f8e4m3", 1, true, true, 16, 8},
    {loomFloat8e5m2, "f8e5m2", 1, true, true, 8, 15},
}};

struct Alias {
  std::string_view name;
  loomDataType_t type;
};
// Spellings besides nccl-tests' own, which people type out of habit.
constexpr Alias kTypeAliases[] = {
    {"char", loomInt8},       {"int", loomInt32},          {"float16", loomFloat16},    {"fp16", loomFloat16},
    {"float32", loomFloat32}, {"fp32", loomFloat32},       {"float64", loomFloat64},    {"fp64", loomFloat64},
    {"bf16", loomBfloat16},   {"fp8e4m3", loomFloat8e4m3}, {"fp8e5m2", loomFloat8e5m2},
};

struct OpName {
  std::string_view name;
  RedOp op;
};
constexpr OpName kOps[] = {
    {"sum", RedOp::Sum}, {"prod", RedOp::Prod},           {"max", RedOp::Max},         {"min", RedOp::Min},
    {"avg", RedOp::Avg}, {"premulsum", RedOp::PreMulSum}, {"mulsum", RedOp::PreMulSum}};

}  // namespace

const DataTypeInfo& dataTypeInfo(loomDataType_t type) { return kTypes.at(static_cast<size_t>(type)); }

const std::vector<loomDataType_t>& allDataTypes() {
  static const std::vector<loomDataType_t> types = [] {
    std::vector<loomDataType_t> v;
    for (const auto& t : kTypes) v.push_back(t.type);
    return v;
  }();
  return types;
}

std::optional<loomDataType_t> parseDataType(std::string_view name) {
  for (const auto& t : kTypes)
    if (name == t.name) return t.type;
  for (const auto& a : kTypeAliases)
    if (name == a.name) return a.type;
  return std::nullopt;
}

std::vector<std::string> dataTypeNames() {
  std::vector<std::string> names;
  for (const auto& t : kTypes) names.emplace_back(t.name);
  for (const auto& a : kTypeAliases) names.emplace_back(a.name);
  return names;
}

const char* redOpName(RedOp op) {
  switch (op) {
    case RedOp::Sum:
      return "sum";
    case RedOp::Prod:
      return "prod";
    case RedOp::Max:
      return "max";
    case RedOp::Min:
      return "min";
    case RedOp::Avg:
      return "avg";
    case RedOp::PreMulSum:
      return "premulsum";
    case RedOp::None:
      return "none";
  }
  return "?";
}

const std::vector<RedOp>& allRedOps() {
  static const std::vector<RedOp> ops = {RedOp::Sum, RedOp::Prod, RedOp::Max,
                                         RedOp::Min, RedOp::Avg,  RedOp::PreMulSum};
  return ops;
}

std::optional<RedOp> parseRedOp(std::string_view name) {
  for (const auto& o : kOps)
    if (name == o.name) return o.op;
  return std::nullopt;
}

std::vector<std::string> redOpNames() {
  std::vector<std::string> names;
  for (const auto& o : kOps) names.emplace_back(o.name);
  return names;
}

}  // namespace loomperf
