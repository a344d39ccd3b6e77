// What loom-perf knows about each collective: nccl-tests' buffer layout and bandwidth factors, the
// Loom call, and which input element each output element must hold.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "loom.h"
#include "pattern.h"

namespace loomperf {

// Element counts for a test of `count` elements (= size / element size), as nccl-tests'
// *GetCollByteCount. In place, send = recv + sendInplaceOffset * rank and
// recv = base + recvInplaceOffset * rank, with base the receive buffer.
struct Layout {
  size_t sendCount;
  size_t recvCount;
  size_t paramCount;  // the count argument of the call, and the "count" column
  size_t sendInplaceOffset;
  size_t recvInplaceOffset;
};

// Where this rank stands in the test.
struct RankView {
  int rank;
  int nranks;
  int root;  // -1 for collectives without a root
  size_t paramCount;
};

struct OpCall {
  const void* send;
  void* recv;
  loomDataType_t type;
  loomRedOp_t op;
  RankView view;
  loomComm_t comm;
  loomStream_t stream;  // -G cuda: this rank's stream; else NULL (host buffers, complete on return)
};

struct Collective {
  const char* name;     // nccl-tests' name without "_perf"
  const char* apiName;  // the Loom call, for error messages
  bool reduces;         // takes a reduction operator
  bool rooted;
  Layout (*layout)(size_t count, int nranks);
  // algbw = paramCount * elementSize * algFactor / time; busbw = algbw * busFactor.
  double (*algFactor)(int nranks);
  double (*busFactor)(int nranks);
  loomResult_t (*run)(const OpCall& call);
  // Whether this rank's receive buffer holds a result (reduce and gather: the root only).
  bool (*hasOutput)(const RankView& view);
  // The value element j of this rank's receive buffer must hold.
  double (*expected)(const ValuePattern& pattern, const RankView& view, size_t j);
};

const std::vector<Collective>& allCollectives();
// Accepts nccl-tests' names with or without "_perf" and with or without underscores.
const Collective* findCollective(std::string_view name);

}  // namespace loomperf
