// The cases of the plan interpreter's host emulation (test_plan_interpreter_emulated.cc): real plans
// from the real builders, every rank's plan encoded over small host-memory FIFOs (2 slots of 4 KiB,
// so messages wrap around many times), every lane on its own thread(s). Each run is checked twice:
// bit for bit against a reference run of the same plans with the host executor's semantics over the
// CPU kernels (every byte of every buffer, guards included), and element by element against the API
// tests' independent model (tests/api/reference.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../api/reference.h"
#include "algorithms/builders.h"
#include "plan_emulation.h"

namespace loomgpu {

inline constexpr uint32_t kSlots = 2;
inline constexpr size_t kSlotBytes = 4096;
inline constexpr uint64_t kCounts[] = {0, 1, 7, 1000, 65537};

struct Case {
  loom::Collective coll = loom::Collective::AllReduce;
  loom::Algorithm algo = loom::Algorithm::Ring;
  int nranks = 1;
  int root = 0;
  uint64_t count = 0;
  loomDataType_t dtype = loomFloat32;
  loomtest::Op op = loomtest::Op::Sum;
  bool inPlace = false;
  int nchannels = 1;
  bool randomFloats = false;  // inputs the model cannot check: compared with the reference run only
  uint32_t workersPerLane = 1;
  uint64_t seed = 1;
  bool direct = false;  // the FIFOs have direct-mode posts (receivers may take messages in place)
  uint64_t lowLatencyBytes = 0;  // messages up to this size travel as low-latency words
  uint32_t staggerMs = 0;  // rank r starts r * staggerMs late
};

std::string describe(const Case& c);
// The request that builds rank's plan: chunks as large as a slot, as the tuner sizes them; the second
// channel's ring runs the other way round.
loom::PlanRequest requestFor(const Case& c, int rank);
// The operator the plan runs with, as core/run/planner.cc makes it (PreMulSum: a sum over scaled inputs).
loom::ReduceOp planOp(const Case& c);

// One rank's buffers for a case: the user's send and receive buffers (one block in place, laid out as
// NCCL's in-place calls are), scratch, and PreMulSum's scaled copy of the input.
struct RankMemory {
  std::vector<std::unique_ptr<GuardedBlock>> blocks;
  char* send = nullptr;  // the user's
  char* recv = nullptr;
  std::vector<char*> buffers;  // by plan buffer index
};
RankMemory makeRankMemory(const Case& c, const loom::Plan& plan);

// Where an emulated run's bytes differ from the reference run's (every block, guards included), or "".
std::string compareRuns(const std::vector<RankMemory>& got, const std::vector<RankMemory>& want);
// The failure that caused the others (ranks that merely saw the abort word come last), or "".
std::string firstFailure(const std::vector<loom::Status>& results);

// Runs one case (on `mesh` when given, whose counters then carry on from earlier operations); "" or
// what went wrong.
std::string runCase(const Case& c, const HostFifoMesh* mesh = nullptr);
// Runs cases; "" or the first few failures.
std::string runAll(const std::vector<Case>& cases);

// Whether the builders serve the case (one-shot: one message; hierarchical: 2 nodes of 2).
bool applies(const Case& c);
// Every algorithm that builds `coll` x 1-4 ranks (8 for ring allreduce) x kCounts x float32,
// bfloat16, int32, float16 x sum, max, avg, premulsum (reductions) x in and out of place; about
// half of them (by a hash of the case's index) over FIFOs with direct-mode posts.
std::vector<Case> matrixFor(loom::Collective coll);

// A point-to-point group on n ranks (see plan_cases.cc), over FIFOs with or without direct-mode
// posts; "" or what went wrong.
std::string runP2pGroup(int n, uint64_t count, bool direct);

}  // namespace loomgpu
