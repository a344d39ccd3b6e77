// The CUDA plan interpreter (src/kernels/cuda/plan_interpreter.cuh) run on the host (plan_cases.h
// says how each run is made and checked), then what must fail: oversized messages and bad bindings
// are refused by the encoder, and waits that cannot end return an error instead of hanging.
//
// What this cannot show: the device Platform (system-scope atomics, __syncthreads, __nanosleep) and
// real GPU memory ordering; those need a GPU run.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "kernels/cuda/host_lane_platform.h"
#include "plan_cases.h"

namespace loomgpu {
namespace {

using loom::Algorithm;
using loom::Collective;
using loomtest::Op;

class Collectives : public ::testing::TestWithParam<Collective> {};

TEST_P(Collectives, MatchTheReferenceRunAndTheModel) {
  const std::vector<Case> cases = matrixFor(GetParam());
  ASSERT_FALSE(cases.empty());
  EXPECT_EQ(runAll(cases), "") << cases.size() << " cases";
}

INSTANTIATE_TEST_SUITE_P(Emulated, Collectives,
                         ::testing::Values(Collective::AllReduce, Collective::ReduceScatter, Collective::Reduce,
                                           Collective::Broadcast, Collective::AllGather, Collective::AlltoAll,
                                           Collective::Gather, Collective::Scatter),
                         [](const ::testing::TestParamInfo<Collective>& info) {
                           return std::string(loom::collectiveName(info.param));
                         });

// Non-exact float inputs: only the reduction order decides the bits, so any step reducing in another
// order than the host executor would show.
TEST(PlanInterpreter, RandomFloatsMatchTheReferenceRunBitForBit) {
  std::vector<Case> cases;
  const std::pair<Collective, Algorithm> shapes[] = {
      {Collective::AllReduce, Algorithm::Ring},     {Collective::AllReduce, Algorithm::Tree},
      {Collective::AllReduce, Algorithm::Direct},   {Collective::AllReduce, Algorithm::OneShot},
      {Collective::ReduceScatter, Algorithm::Ring}, {Collective::Reduce, Algorithm::Tree},
      {Collective::AllReduce, Algorithm::PeerOneShot}, {Collective::AllReduce, Algorithm::PeerMemory},
      {Collective::ReduceScatter, Algorithm::PeerMemory}};
  for (auto [coll, algo] : shapes)
    for (loomDataType_t dtype : {loomFloat32, loomBfloat16, loomFloat16})
      for (Op op : {Op::Sum, Op::Avg})
        for (uint64_t count : {uint64_t{1000}, uint64_t{65537}}) {
          Case c{coll, algo, 3, 1, count, dtype, op};
          c.nchannels = 2;
          c.randomFloats = true;
          c.seed = cases.size() + 7;
          if (applies(c)) cases.push_back(c);
        }
  EXPECT_EQ(runAll(cases), "");
}

// Several host threads per lane, as a block's threads split it: a missing barrier shows as a wrong
// or torn message.
TEST(PlanInterpreter, SeveralWorkersPerLane) {
  std::vector<Case> cases;
  for (uint32_t workers : {2u, 3u}) {
    Case ring{Collective::AllReduce, Algorithm::Ring, 3, 0, 65537, loomFloat32, Op::Sum};
    Case ringAvg{Collective::AllReduce, Algorithm::Ring, 4, 0, 1000, loomBfloat16, Op::Avg, true};
    Case tree{Collective::Reduce, Algorithm::Tree, 4, 3, 65537, loomFloat16, Op::Max};
    Case oneShot{Collective::AllReduce, Algorithm::OneShot, 3, 0, 1000, loomInt32, Op::PreMulSum};
    Case bcast{Collective::Broadcast, Algorithm::Ring, 3, 2, 65537, loomBfloat16, Op::Sum, true};
    Case alltoall{Collective::AlltoAll, Algorithm::Direct, 3, 0, 7000, loomFloat32, Op::Sum};
    for (Case c : {ring, ringAvg, tree, oneShot, bcast, alltoall}) {
      c.nchannels = 2;
      c.workersPerLane = workers;
      c.seed = cases.size() + 11;
      c.direct = cases.size() % 2 == 0;
      c.lowLatencyBytes = cases.size() % 3 == 1 ? loom::cuda::kLowLatencyBytes : 0;  // words polled by 2-3 workers
      cases.push_back(c);
    }
  }
  EXPECT_EQ(runAll(cases), "");
}

// Operations one after another on the same FIFOs: counters (and direct posts, tagged with them) carry on
// from where the last one left them.
TEST(PlanInterpreter, OperationsInSequenceShareTheFifos) {
  const HostFifoMesh mesh(3, 2, kSlots, kSlotBytes, /*directPosts=*/true);
  Case allreduce{Collective::AllReduce, Algorithm::Ring, 3, 0, 10001, loomFloat32, Op::Sum};
  Case broadcast{Collective::Broadcast, Algorithm::Tree, 3, 1, 5000, loomBfloat16, Op::Sum};
  Case allgather{Collective::AllGather, Algorithm::Direct, 3, 0, 777, loomInt32, Op::Sum};
  Case reduce{Collective::Reduce, Algorithm::Ring, 3, 2, 3001, loomFloat16, Op::Avg};
  uint64_t seed = 100;
  for (Case c : {allreduce, broadcast, allgather, reduce, allreduce}) {
    c.nchannels = 2;
    c.seed = ++seed;
    EXPECT_EQ(runCase(c, &mesh), "");
  }
}

TEST(PlanInterpreter, PointToPointGroups) {
  for (int n = 1; n <= 4; ++n)
    for (uint64_t count : kCounts)
      for (bool direct : {false, true}) EXPECT_EQ(runP2pGroup(n, count, direct), "");
}

// A 2-rank ring all-reduce of `count` floats in chunks of `chunk` elements: each rank's plan, its input
// (input(rank, i)), the emulation's runs into `recv` and the reference run's into `expect`.
struct TwoRankRing {
  template <class Input>
  TwoRankRing(uint64_t count, uint64_t chunk, Input input)
      : send(2, std::vector<float>(count)), recv(send), expect(send) {
    for (int r = 0; r < 2; ++r) {
      loom::PlanRequest req;
      req.nranks = 2;
      req.rank = r;
      req.count = count;
      req.elemSize = 4;
      req.chunkElems = chunk;
      built = built && loom::buildRingPlan(req, &plans[r]).ok();
      for (const loom::Lane& lane : plans[r].lanes) steps += lane.steps.size();
      for (uint64_t i = 0; i < count; ++i) send[r][i] = input(r, i);
      runs.push_back(RankRun{&plans[r], {reinterpret_cast<char*>(send[r].data()), reinterpret_cast<char*>(recv[r].data())}});
      reference.push_back(RankRun{&plans[r], {reinterpret_cast<char*>(send[r].data()), reinterpret_cast<char*>(expect[r].data())}});
    }
  }
  TwoRankRing(const TwoRankRing&) = delete;  // the runs point into its vectors
  TwoRankRing& operator=(const TwoRankRing&) = delete;

  bool built = true;
  std::vector<loom::Plan> plans = std::vector<loom::Plan>(2);
  std::vector<std::vector<float>> send, recv, expect;
  std::vector<RankRun> runs, reference;
  uint64_t steps = 0;  // both ranks' plan steps
};

// The handshake a GPU pays per step (plan_interpreter.cuh): every step that sends or receives through a
// slot publishes with one release (a step that does both: one fence for both counters), at the
// FIFO's scope, so that ranks of one process on one GPU fence at the GPU's scope only; and a sender
// whose slots are known to be free, or a receiver whose message is known to be counted, reads no
// counter again. Counted by the host platform (HostLaneCounts) over a 2-rank ring allreduce of 64
// chunks per rank through 4 slots, whose results must still match the reference run.
TEST(PlanInterpreter, EveryStepPublishesWithOneReleaseAtItsFifosScope) {
  constexpr uint64_t kCount = 64 * 1024;
  constexpr uint64_t kChunk = 1024;
  for (loom::cuda::FifoScope scope : {loom::cuda::FifoScope::System, loom::cuda::FifoScope::Gpu}) {
    HostFifoMesh mesh(2, 1, 4, kChunk * 4);
    mesh.setScope(scope);
    TwoRankRing ring(kCount, kChunk, [](int r, uint64_t i) { return static_cast<float>((i * 7 + r * 3) % 1000); });
    ASSERT_TRUE(ring.built);
    loom::cuda::HostLaneCounts counts;
    EmulationOptions options;
    options.counts = &counts;
    for (const loom::Status& st : runEmulated(ring.runs, mesh, loomFloat32, loom::ReduceOp{}, options))
      ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_TRUE(runReference(ring.reference, loomFloat32, loom::ReduceOp{}).ok());
    EXPECT_EQ(ring.recv, ring.expect);
    // Every step of a ring allreduce sends or receives (or both) through a slot.
    const bool gpu = scope == loom::cuda::FifoScope::Gpu;
    EXPECT_EQ(counts.systemReleases.load(), gpu ? 0 : ring.steps) << ring.steps << " steps";
    EXPECT_EQ(counts.gpuReleases.load(), gpu ? ring.steps : 0) << ring.steps << " steps";
  }
}

// A sender whose slots are known to be free and a receiver whose messages are known to be counted read
// no counter: rank 0 alone sends 4 messages into 4 free slots (no read of the head at all), then rank
// 1 alone receives them (one read of the tail, which counts all 4).
TEST(PlanInterpreter, CountersSeenOnceAreNotReadAgain) {
  constexpr uint64_t kSlotsHere = 4;
  HostFifoMesh mesh(2, 1, kSlotsHere, kSlotBytes);
  std::vector<char> sent(kSlotsHere * kSlotBytes), received(sent.size());
  for (size_t i = 0; i < sent.size(); ++i) sent[i] = static_cast<char>(i * 13);
  loom::Plan send, recv;
  ASSERT_TRUE(loom::buildP2pPlan(2, 0, {{true, 1, sent.size()}}, kSlotBytes, &send).ok());
  ASSERT_TRUE(loom::buildP2pPlan(2, 1, {{false, 0, received.size()}}, kSlotBytes, &recv).ok());
  char* out = sent.data();
  char* in = received.data();
  for (const auto& [run, acquires] : {std::pair{RankRun{&send, {out, out, out, out}}, 0}, {RankRun{&recv, {in, in, in, in}}, 1}}) {
    loom::cuda::HostLaneCounts counts;
    EmulationOptions options;
    options.counts = &counts;
    for (const loom::Status& st : runEmulated({run}, mesh, loomUint8, loom::ReduceOp{}, options))
      ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(counts.acquires.load(), static_cast<uint64_t>(acquires)) << "rank " << run.plan->rank;
    EXPECT_EQ(counts.systemReleases.load(), kSlotsHere) << "rank " << run.plan->rank;  // one per message
  }
  EXPECT_EQ(received, sent);
}

// LOOM_DEVICE_PROFILE: each lane's first worker splits its time between waiting, data and publishing,
// and those parts add up to the lane's whole time; a lane whose peer starts 200 ms late waits at least
// half of that. Not profiled, a lane reports no time at all. The results match the reference either way.
TEST(PlanInterpreter, ProfiledLanesSayWhereTheirTimeWent) {
  constexpr uint64_t kCount = 16 * 1024;
  constexpr uint64_t kChunk = 1024;
  constexpr uint32_t kLateMs = 200;
  for (bool profile : {true, false}) {
    HostFifoMesh mesh(2, 1, 4, kChunk * 4);
    TwoRankRing ring(kCount, kChunk, [](int r, uint64_t i) { return static_cast<float>((i * 5 + r) % 777); });
    ASSERT_TRUE(ring.built);
    std::vector<std::vector<loom::cuda::DeviceLaneStatus>> statuses;
    EmulationOptions options;
    options.profile = profile;
    options.laneStatuses = &statuses;
    options.startDelayMs = {0, kLateMs};
    for (const loom::Status& st : runEmulated(ring.runs, mesh, loomFloat32, loom::ReduceOp{}, options))
      ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_TRUE(runReference(ring.reference, loomFloat32, loom::ReduceOp{}).ok());
    EXPECT_EQ(ring.recv, ring.expect);
    ASSERT_EQ(statuses.size(), 2u);
    for (int r = 0; r < 2; ++r) {
      ASSERT_EQ(statuses[r].size(), ring.plans[r].lanes.size());
      for (size_t l = 0; l < ring.plans[r].lanes.size(); ++l) {
        const loom::cuda::DeviceLaneProfile& p = statuses[r][l].profile;
        if (!profile) {
          EXPECT_EQ(p.waitNs + p.dataNs + p.publishNs + p.laneNs + p.bytes, 0u) << "rank " << r << " lane " << l;
          continue;
        }
        uint64_t bytes = 0;
        for (const loom::Step& step : ring.plans[r].lanes[l].steps) bytes += step.count * 4;
        EXPECT_EQ(statuses[r][l].step, ring.plans[r].lanes[l].steps.size());
        EXPECT_EQ(p.bytes, bytes) << "rank " << r << " lane " << l;
        EXPECT_EQ(p.waitNs + p.dataNs + p.publishNs, p.laneNs) << "the parts cover the lane's time, once each";
        EXPECT_GT(p.dataNs, 0u);
        if (r == 0) {
          EXPECT_GE(p.waitNs, uint64_t{kLateMs / 2} * 1000000u) << "rank 1 started " << kLateMs << " ms late";
        }
      }
    }
  }
}

// ---- What must fail ----------------------------------------------------------------------------------

struct SingleRank {
  loom::Plan plan;
  std::vector<loom::cuda::DeviceFifo> sends, recvs;
  std::vector<char*> buffers;
  std::vector<loom::cuda::DeviceLaneStatus> status;
  loom::device::DevicePlanBindings bindings;
  loom::cuda::DevicePlanCall call;
  std::vector<std::max_align_t> out;

  // Encodes the plan, then binds its call (as a launch does).
  loom::Status encode() {
    bindings.buffers = buffers;
    bindings.sends = sends;
    bindings.recvs = recvs;
    bindings.laneStatus = status.empty() ? nullptr : status.data();
    out.resize(loom::device::devicePlanBytes(plan, bindings) / sizeof(std::max_align_t) + 1);
    loom::cuda::DevicePlanShape shape;
    LOOM_TRY(loom::device::encodeDevicePlan(plan, bindings, std::as_writable_bytes(std::span(out)), &shape));
    return loom::device::bindDevicePlanCall(plan, bindings, bindings.buffers.data(), &call);
  }
};

// Rank 0 of a 2-rank ring allreduce of `count` floats in chunks of chunkElems, over `mesh`.
void ringRank0(SingleRank& s, const HostFifoMesh& mesh, uint64_t count, uint64_t chunkElems, char* memory) {
  loom::PlanRequest req;
  req.nranks = 2;
  req.count = count;
  req.elemSize = 4;
  req.chunkElems = chunkElems;
  ASSERT_TRUE(loom::buildRingPlan(req, &s.plan).ok());
  s.sends = mesh.sends(0);
  s.recvs = mesh.recvs(0);
  s.buffers = {memory, memory, memory + count * 4};
  s.status.assign(s.plan.lanes.size(), {});
  s.bindings.dtype = loomFloat32;
  s.bindings.nchannels = mesh.nchannels();
}

TEST(PlanInterpreter, EncoderRefusesMessagesLargerThanTheSlots) {
  const HostFifoMesh mesh(2, 1, kSlots, kSlotBytes);
  std::vector<float> memory(20000);
  SingleRank s;
  ringRank0(s, mesh, 10000, 2048, reinterpret_cast<char*>(memory.data()));  // 8 KiB messages, 4 KiB slots
  const loom::Status st = s.encode();
  EXPECT_EQ(st.code(), loomInvalidArgument);
  EXPECT_NE(st.message().find("bytes does not fit the 4096-byte slots"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("chunkElems <= 1024"), std::string::npos) << st.message();
}

TEST(PlanInterpreter, EncoderRefusesWhatItCannotBind) {
  const HostFifoMesh mesh(2, 1, kSlots, kSlotBytes);
  std::vector<float> memory(2000);
  char* base = reinterpret_cast<char*>(memory.data());
  auto expectRefused = [](SingleRank& s, const char* words) {
    const loom::Status st = s.encode();
    EXPECT_EQ(st.code(), loomInvalidArgument) << words;
    EXPECT_NE(st.message().find(words), std::string::npos) << st.message();
  };
  {
    SingleRank s;
    ringRank0(s, mesh, 1000, 1024, base);
    ASSERT_TRUE(s.encode().ok());
    s.buffers[loom::kRecvBuffer] = nullptr;
    expectRefused(s, "buffer 1 is not bound");
  }
  {
    SingleRank s;
    ringRank0(s, mesh, 1000, 1024, base);
    s.sends[1] = {};  // rank 0's FIFO to rank 1, channel 0
    expectRefused(s, "no FIFO bound to send to rank 1 on channel 0");
  }
  {
    SingleRank s;
    ringRank0(s, mesh, 1000, 1024, base);
    s.recvs.pop_back();
    expectRefused(s, "FIFO tables of 2 and 1 entries");
  }
  {
    SingleRank s;
    ringRank0(s, mesh, 1000, 1024, base);
    s.status.clear();
    expectRefused(s, "no lane status");
  }
  {
    // Local copies and reductions the workers could not split safely.
    SingleRank s;
    ringRank0(s, mesh, 1000, 1024, base);
    s.plan.lanes.resize(1);
    s.plan.lanes[0].steps = {
        loom::Step{loom::StepKind::Copy, -1, -1, {loom::kSendBuffer, 0}, {loom::kScratchBuffer, 0}, 8}};
    s.buffers = {base, base, base + 16};
    expectRefused(s, "source and destination partially overlap");
    s.plan.lanes[0].steps[0].kind = loom::StepKind::Reduce;
    s.buffers = {base, base, base};
    expectRefused(s, "source and destination must not overlap");
  }
}

TEST(PlanInterpreter, AbortedWaitReturnsInsteadOfHanging) {
  const HostFifoMesh mesh(2, 1, kSlots, kSlotBytes);
  Case c{Collective::AllReduce, Algorithm::Ring, 2, 0, 1000, loomFloat32, Op::Sum};
  loom::Plan plan;
  ASSERT_TRUE(loom::buildPlan(c.algo, requestFor(c, 0), &plan).ok());
  RankMemory m = makeRankMemory(c, plan);
  uint32_t abortWord = 0;
  EmulationOptions options;
  options.abort = &abortWord;
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::atomic_ref<uint32_t>(abortWord).store(1);
  });
  const auto start = std::chrono::steady_clock::now();
  const std::vector<loom::Status> results = runEmulated({RankRun{&plan, m.buffers}}, mesh, c.dtype, planOp(c), options);
  aborter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(results[0].code(), loomRemoteError);
  EXPECT_NE(results[0].message().find("aborted while waiting"), std::string::npos) << results[0].message();
  EXPECT_NE(results[0].message().find("waiting on rank 1"), std::string::npos) << results[0].message();
}

TEST(PlanInterpreter, StalledWaitTimesOut) {
  const HostFifoMesh mesh(2, 1, kSlots, kSlotBytes);
  Case c{Collective::Broadcast, Algorithm::Ring, 2, 1, 1000, loomFloat32, Op::Sum};
  loom::Plan plan;
  ASSERT_TRUE(loom::buildPlan(c.algo, requestFor(c, 0), &plan).ok());
  RankMemory m = makeRankMemory(c, plan);
  EmulationOptions options;
  options.timeoutNs = 50'000'000;
  const std::vector<loom::Status> results = runEmulated({RankRun{&plan, m.buffers}}, mesh, c.dtype, planOp(c), options);
  EXPECT_EQ(results[0].code(), loomTimeout);
  EXPECT_NE(results[0].message().find("step 0/1 (Recv) waiting on rank 1"), std::string::npos) << results[0].message();
}

// Rank 1 expects 90 bytes where rank 0 sends 100; its other lane waits on rank 2, which never runs,
// and stops because the failed lane raises the abort word.
TEST(PlanInterpreter, SizeMismatchIsReportedAndStopsTheOtherLanes) {
  const HostFifoMesh mesh(3, 1, kSlots, kSlotBytes);
  std::vector<char> memory(1000);
  loom::Plan send, recv;
  ASSERT_TRUE(loom::buildP2pPlan(3, 0, {{true, 1, 100}}, kSlotBytes, &send).ok());
  ASSERT_TRUE(loom::buildP2pPlan(3, 1, {{false, 0, 90}, {false, 2, 50}}, kSlotBytes, &recv).ok());
  char* p = memory.data();
  uint32_t abortWord = 0;
  EmulationOptions options;
  options.abort = &abortWord;
  const auto start = std::chrono::steady_clock::now();
  const std::vector<loom::Status> results =
      runEmulated({RankRun{&send, {p, p, p, p}}, RankRun{&recv, {p, p, p, p + 100, p + 200}}}, mesh, loomUint8,
                  loom::ReduceOp{}, options);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_TRUE(results[0].ok()) << results[0].message();
  EXPECT_EQ(results[1].code(), loomInvalidUsage);
  EXPECT_NE(results[1].message().find("100 bytes arrived"), std::string::npos) << results[1].message();
  EXPECT_EQ(abortWord, 1u);
}

TEST(PlanInterpreter, KernelOfAnotherDtypeRefusesToRun) {
  const HostFifoMesh mesh(2, 1, kSlots, kSlotBytes);
  std::vector<float> memory(2000);
  SingleRank s;
  ringRank0(s, mesh, 1000, 1024, reinterpret_cast<char*>(memory.data()));
  ASSERT_TRUE(s.encode().ok());
  loom::cuda::HostLane lane(1);
  loom::cuda::HostLanePlatform platform(&lane, 0);
  loom::cuda::runLane<loom::cuda::HalfElem>(s.out.data(), s.call, 0, platform);  // a 2-byte kernel, a 4-byte plan
  const loom::Status st = loom::device::devicePlanResult(s.plan, s.status);
  EXPECT_EQ(st.code(), loomInternalError);
  EXPECT_NE(st.message().find("the kernel's dtype is not the encoded plan's"), std::string::npos) << st.message();
  // A lane that never ran is not mistaken for one that finished.
  s.status.assign(s.status.size(), {});
  EXPECT_NE(loom::device::devicePlanResult(s.plan, s.status).message().find("did not report"), std::string::npos);
}

}  // namespace
}  // namespace loomgpu
