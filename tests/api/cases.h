// One collective call with its arguments ("case"), run on one rank and checked element by element
// against the reference model, plus the matrices of cases that the test files run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness.h"
#include "reference.h"

namespace loomtest {

enum class Coll { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AlltoAll, Gather, Scatter, SendRecv };
inline constexpr Coll kAllColls[] = {Coll::AllReduce, Coll::Broadcast, Coll::Reduce,
                                     Coll::AllGather, Coll::ReduceScatter, Coll::AlltoAll,
                                     Coll::Gather,    Coll::Scatter,       Coll::SendRecv};
const char* collName(Coll coll);
bool isReduction(Coll coll);
bool isRooted(Coll coll);
// NCCL's in-place layouts: allreduce/broadcast/reduce send == recv; allgather send == recv +
// rank*count; reducescatter recv == send + rank*count; gather (root) send == recv + root*count;
// scatter (root) recv == send + root*count. AlltoAll and the send/recv ring have none.
bool supportsInPlace(Coll coll);

struct Case {
  Coll coll = Coll::AllReduce;
  loomDataType_t dtype = loomFloat32;
  Op op = Op::Sum;  // reductions only
  size_t count = 0;  // NCCL's count argument (per rank for allgather/reducescatter/alltoall/gather/scatter)
  bool inPlace = false;
  int root = 0;  // rooted collectives only
  uint64_t seed = 1;
};

std::string describeCase(const Case& c, const RankContext& ctx);

struct CaseResult {
  std::string failure;  // "" when the rank's results are right
  bool fatal = false;   // a call failed: the communicator may be unusable, stop the sequence
};

// Runs c on ctx.comm (blocking, stream NULL) and checks this rank's outputs, guard bytes around
// every buffer, and that send buffers are unchanged.
CaseResult runCase(RankContext& ctx, const Case& c);

// Runs cases in order on every rank (all ranks must get the same list). Wrong results are collected
// (up to maxFailures) and the run goes on; a failed call aborts the communicator (ctx.comm = null,
// so its peers see the failure instead of waiting for it) and ends the run.
std::string runCases(RankContext& ctx, const std::vector<Case>& cases, int maxFailures = 8);

inline const std::vector<size_t> kStandardCounts = {0, 1, 3, 1000, 65537};
inline constexpr size_t kLargeCount = 4 * 1024 * 1024 + 3;

struct MatrixSpec {
  std::vector<Coll> colls;
  std::vector<loomDataType_t> dtypes{std::begin(kAllDtypes), std::end(kAllDtypes)};
  std::vector<Op> ops{std::begin(kAllOps), std::end(kAllOps)};
  std::vector<size_t> counts = kStandardCounts;
  std::vector<bool> inPlace = {false, true};
  // true: every dtype x every op. false: dtypes and ops rotate so that each dtype and each op appears
  // once per (collective, count, in-place, root), in a different pairing each time.
  bool crossDtypeOp = true;
  // true: every root for rooted collectives. false: the root rotates from case to case.
  bool everyRoot = false;
};

std::vector<Case> buildCases(const MatrixSpec& spec, int nranks);

}  // namespace loomtest
