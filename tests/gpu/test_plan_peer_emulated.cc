// Peer-memory plans (algorithms/peer_memory.cc) in the plan interpreter, run on the host: the whole
// matrix is test_plan_interpreter_emulated.cc's (every collective they serve, 1-8 ranks, in and out of
// place, bit for bit against the reference run and the model). Here: their results have the bits of
// the FIFO one-shot plan's (the same rank order), several workers per lane, ranks that start late, a
// rank that never comes (a timeout naming it, instead of a hang), and boards whose counters carry on
// from one operation to the next between FIFO plans on the same mesh.
#include <gtest/gtest.h>

#include <memory>
#include <cstring>
#include <string>
#include <vector>

#include "base/datatype.h"
#include "plan_cases.h"

namespace loomgpu {
namespace {

using loom::Algorithm;
using loom::Collective;
using loomtest::Op;

// Every rank's recv buffer after `c` ran emulated (random inputs from c.seed), or a failure in *why.
std::vector<std::vector<char>> outputsOf(const Case& c, std::string* why) {
  std::vector<loom::Plan> plans(c.nranks);
  for (int r = 0; r < c.nranks; ++r)
    if (loom::Status st = loom::buildPlan(c.algo, requestFor(c, r), &plans[r]); !st.ok()) {
      *why = st.message();
      return {};
    }
  std::vector<RankMemory> memory;
  std::vector<RankRun> runs;
  for (const loom::Plan& plan : plans) memory.push_back(makeRankMemory(c, plan));
  for (int r = 0; r < c.nranks; ++r) runs.push_back(RankRun{&plans[r], memory[r].buffers});
  HostFifoMesh mesh(c.nranks, c.nchannels, kSlots, kSlotBytes);
  uint32_t abortWord = 0;
  EmulationOptions options;
  options.abort = &abortWord;
  *why = firstFailure(runEmulated(runs, mesh, c.dtype, planOp(c), options));
  std::vector<std::vector<char>> out;
  const uint64_t bytes = c.count * loom::dataTypeSize(c.dtype);
  for (const RankMemory& m : memory) out.emplace_back(m.recv, m.recv + bytes);
  return out;
}

// Inexact floats: only the order of the reduction decides the bits.
TEST(PeerMemory, ResultsHaveTheOneShotPlansBits) {
  for (int n : {2, 3, 5, 8})
    for (loomDataType_t dtype : {loomFloat32, loomBfloat16, loomFloat16})
      for (Op op : {Op::Sum, Op::Avg})
        for (Algorithm algo : {Algorithm::PeerOneShot, Algorithm::PeerMemory}) {
          Case c{Collective::AllReduce, algo, n, 0, 1000, dtype, op};
          c.nchannels = 2;
          c.randomFloats = true;
          c.seed = static_cast<uint64_t>(n) * 31 + static_cast<uint64_t>(dtype);
          Case oneShot = c;
          oneShot.algo = Algorithm::OneShot;
          std::string why;
          const auto got = outputsOf(c, &why);
          ASSERT_EQ(why, "") << describe(c);
          const auto want = outputsOf(oneShot, &why);
          ASSERT_EQ(why, "") << describe(oneShot);
          for (int r = 0; r < n; ++r) {
            EXPECT_EQ(got[r], want[r]) << describe(c) << ": rank " << r << " differs from the one-shot plan's";
            EXPECT_EQ(got[r], got[0]) << describe(c) << ": rank " << r << " differs from rank 0";
          }
        }
}

// A block's threads split each pass: a missing barrier around the Meets or the pass shows as a wrong
// or racy result.
TEST(PeerMemory, SeveralWorkersPerLane) {
  std::vector<Case> cases;
  for (Collective coll : {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather, Collective::Broadcast})
    for (bool inPlace : {false, true}) {
      Case c{coll, Algorithm::PeerMemory, 3, 1, 65537, loomBfloat16, Op::Avg, inPlace};
      if (!isReduction(coll)) c.op = Op::Sum;
      c.nchannels = 2;
      c.workersPerLane = 3;
      cases.push_back(c);
    }
  Case oneShot{Collective::AllReduce, Algorithm::PeerOneShot, 4, 0, 1000, loomFloat16, Op::PreMulSum, true};
  oneShot.workersPerLane = 2;
  cases.push_back(oneShot);
  EXPECT_EQ(runAll(cases), "");
}

// Ranks that start 40 ms apart: each Meet waits for the last one, and nobody reads a buffer early.
TEST(PeerMemory, RanksThatStartLateAreWaitedFor) {
  std::vector<Case> cases;
  for (Algorithm algo : {Algorithm::PeerOneShot, Algorithm::PeerMemory})
    for (bool inPlace : {false, true}) {
      Case c{Collective::AllReduce, algo, 3, 0, 4099, loomFloat32, Op::Sum, inPlace};
      c.staggerMs = 40;
      c.nchannels = 2;
      cases.push_back(c);
    }
  EXPECT_EQ(runAll(cases), "");
}

// A rank that never runs its part: the others' Meet times out and says whom it waited on.
TEST(PeerMemory, ARankThatNeverComesTimesOutNamingIt) {
  const Case c{Collective::AllReduce, Algorithm::PeerMemory, 3, 0, 1000, loomFloat32, Op::Sum};
  std::vector<loom::Plan> plans(3);
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(loom::buildPlan(c.algo, requestFor(c, r), &plans[r]).ok());
  plans[2].lanes.clear();  // rank 2 runs nothing
  std::vector<RankMemory> memory;
  std::vector<RankRun> runs;
  for (const loom::Plan& plan : plans) memory.push_back(makeRankMemory(c, plan));
  for (int r = 0; r < 3; ++r) runs.push_back(RankRun{&plans[r], memory[r].buffers});
  HostFifoMesh mesh(3, 1, kSlots, kSlotBytes);
  EmulationOptions options;
  options.timeoutNs = 200'000'000;  // no abort word: each rank times out by itself
  const std::vector<loom::Status> results = runEmulated(runs, mesh, c.dtype, planOp(c), options);
  for (int r : {0, 1}) {
    EXPECT_EQ(results[r].code(), loomTimeout) << results[r].message();
    EXPECT_NE(results[r].message().find("step 0/3 (Meet) waiting on rank 2"), std::string::npos) << results[r].message();
  }
  EXPECT_TRUE(results[2].ok());
}

// Rank processes' peer-memory plans translate each peer's buffers through its windows (device memory in
// the kernel; the table is shared by the ranks here, since each rank's view of a peer's window is the
// same address in one process). A table with every rank's buffers in windows changes nothing of the
// result; one without rank 2's fails the readers of rank 2's buffers, naming it, instead of reading
// wherever its address points.
struct WindowRun {
  std::vector<loom::Plan> plans;
  std::vector<RankMemory> memory;
  std::vector<loom::Status> results;
};

WindowRun runWithWindows(const Case& c, int ranksInWindows) {
  WindowRun w;
  w.plans.resize(c.nranks);
  for (int r = 0; r < c.nranks; ++r) EXPECT_TRUE(loom::buildPlan(c.algo, requestFor(c, r), &w.plans[r]).ok());
  std::vector<RankRun> runs;
  for (const loom::Plan& plan : w.plans) w.memory.push_back(makeRankMemory(c, plan));
  for (int r = 0; r < c.nranks; ++r) runs.push_back(RankRun{&w.plans[r], w.memory[r].buffers});
  auto table = std::make_unique<loom::cuda::DeviceWindowTable>();
  const uint64_t bytes = c.count * loom::dataTypeSize(c.dtype) * static_cast<uint64_t>(c.nranks);
  for (int r = 0; r < ranksInWindows; ++r) {
    int slot = 0;
    for (const char* buffer : {w.memory[r].send, w.memory[r].recv}) {
      const auto at = reinterpret_cast<uintptr_t>(buffer);
      table->views[slot++][r] = loom::cuda::DeviceWindowView{at, bytes, at};
    }
  }
  table->slotsUsed = 2;
  HostFifoMesh mesh(c.nranks, c.nchannels, kSlots, kSlotBytes);
  uint32_t abortWord = 0;
  EmulationOptions options;
  options.abort = &abortWord;
  options.windows = table.get();
  w.results = runEmulated(runs, mesh, c.dtype, planOp(c), options);
  return w;
}

TEST(PeerMemory, PeersBuffersAreReadThroughTheirWindows) {
  for (Algorithm algo : {Algorithm::PeerOneShot, Algorithm::PeerMemory}) {
    Case c{Collective::AllReduce, algo, 3, 0, 4099, loomFloat32, Op::Sum};
    c.nchannels = 2;
    const WindowRun windowed = runWithWindows(c, 3);
    EXPECT_EQ(firstFailure(windowed.results), "") << describe(c);
    std::string why;
    const auto plain = outputsOf(c, &why);
    ASSERT_EQ(why, "") << describe(c);
    const uint64_t bytes = c.count * loom::dataTypeSize(c.dtype);
    for (int r = 0; r < c.nranks; ++r)
      EXPECT_EQ(std::vector<char>(windowed.memory[r].recv, windowed.memory[r].recv + bytes), plain[r])
          << describe(c) << ": rank " << r;
  }
}

TEST(PeerMemory, ABufferInNoWindowIsNamedNotRead) {
  const Case c{Collective::AllReduce, Algorithm::PeerMemory, 3, 0, 1000, loomFloat32, Op::Sum};
  const WindowRun w = runWithWindows(c, 2);  // rank 2's buffers are in no window
  for (int r : {0, 1}) {
    EXPECT_EQ(w.results[r].code(), loomInvalidUsage) << w.results[r].message();
    EXPECT_NE(w.results[r].message().find("reading rank 2's buffers"), std::string::npos) << w.results[r].message();
    EXPECT_NE(w.results[r].message().find("in none of its windows"), std::string::npos) << w.results[r].message();
  }
}

// Operations one after another on one mesh: the boards' Meet counters carry on from the last
// peer-memory plan across FIFO plans, as a communicator's do across launches.
TEST(PeerMemory, BoardsCarryOnAcrossOperations) {
  const HostFifoMesh mesh(4, 2, kSlots, kSlotBytes, /*directPosts=*/true);
  std::vector<Case> order;
  for (int round = 0; round < 3; ++round) {
    Case peer{Collective::AllReduce, Algorithm::PeerMemory, 4, 0, 4099, loomInt32, Op::Sum, round == 1};
    peer.nchannels = 2;
    Case ring{Collective::AllReduce, Algorithm::Ring, 4, 0, 1000, loomInt32, Op::Max};
    ring.nchannels = 2;
    Case gather{Collective::AllGather, Algorithm::PeerMemory, 4, 0, 777, loomInt32, Op::Sum};
    gather.nchannels = round == 2 ? 1 : 2;  // a plan on fewer channels: the others' counters wait
    Case oneShot{Collective::AllReduce, Algorithm::PeerOneShot, 4, 0, 7, loomFloat32, Op::Avg};
    oneShot.nchannels = 2;
    order.insert(order.end(), {peer, ring, gather, oneShot});
  }
  for (size_t i = 0; i < order.size(); ++i) {
    order[i].seed = i + 1;
    EXPECT_EQ(runCase(order[i], &mesh), "") << "operation " << i;
  }
}

}  // namespace
}  // namespace loomgpu
