// Plan sequences run on the host: several operations of each rank encoded into one launch
// (device/plan_encoder.h's layoutDevicePlanSequence) and run by plan_interpreter.cuh's runSequence, block b
// running lane b of each plan in order and the blocks meeting between plans (plan_emulation.h's
// runSequenceEmulated). Checked against the reference run of the operations one by one and against
// the values they must produce; then what a failed plan, or a slow lane, does to the plans after it.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <tuple>

#include "base/datatype.h"
#include "plan_cases.h"

namespace loomgpu {
namespace {

using loom::Algorithm;
using loom::Collective;
using loomtest::Op;

constexpr int kSequenceRanks = 3;
constexpr size_t kBlockA = 0, kBlockG = 1;  // every rank's two user buffers; each operation's scratch follows

// Where an operation's user buffer starts: `at` elements into buffer A or G.
struct Place {
  size_t block;
  uint64_t at;
};

// One operation of a sequence: the case its plans are built from and where its buffers lie.
struct SequenceOp {
  Case c;
  Place send, recv;
};

struct Sequence {
  std::vector<SequenceOp> ops;
  uint64_t elemsA = 0, elemsG = 0;
};

// Each operation reads what the one before wrote, through other lanes (other algorithms, other chunk
// boundaries), and reaches past it into what no operation wrote yet, so that a plan starting before
// the one before it ended, or reading another lane's stale bytes, shows: an in-place ring allreduce of
// A[0, c), an in-place tree allreduce of A[c/2, 3c/2), an in-place broadcast from rank 1 of
// A[c, 2c) and an allgather of A[3c/2 + 1, 5c/2 + 1) into G. A's tail is never written.
Sequence chainedSequence(loomDataType_t dtype, uint64_t c, uint32_t workers) {
  auto op = [&](Collective coll, Algorithm algo, int root, Place send, Place recv) {
    Case k{coll, algo, kSequenceRanks, root, c, dtype, Op::Sum};
    k.nchannels = 2;
    k.workersPerLane = workers;
    return SequenceOp{k, send, recv};
  };
  Sequence s;
  s.ops = {op(Collective::AllReduce, Algorithm::Ring, 0, {kBlockA, 0}, {kBlockA, 0}),
           op(Collective::AllReduce, Algorithm::Tree, 0, {kBlockA, c / 2}, {kBlockA, c / 2}),
           op(Collective::Broadcast, Algorithm::Direct, 1, {kBlockA, c}, {kBlockA, c}),
           op(Collective::AllGather, Algorithm::Ring, 0, {kBlockA, 3 * c / 2 + 1}, {kBlockG, 0})};
  s.elemsA = 3 * c + 3;
  s.elemsG = kSequenceRanks * c;
  return s;
}

// Small integers, negative too: every sum is exact in float32 as well, so the model below is exact.
int64_t initialValue(int rank, uint64_t i) {
  return static_cast<int64_t>((i * 7 + static_cast<uint64_t>(rank) * 1'000'003) % 2001) - 1000;
}

void storeValue(loomDataType_t dtype, int64_t v, char* p) {
  if (dtype == loomInt32) {
    const auto x = static_cast<int32_t>(v);
    std::memcpy(p, &x, sizeof x);
  } else {
    const auto x = static_cast<float>(v);
    std::memcpy(p, &x, sizeof x);
  }
}

int64_t loadValue(loomDataType_t dtype, const char* p) {
  if (dtype == loomInt32) {
    int32_t x;
    std::memcpy(&x, p, sizeof x);
    return x;
  }
  float x;
  std::memcpy(&x, p, sizeof x);
  return static_cast<int64_t>(x);
}

// The sequence's plans, [op][rank]; `count(op, rank)` may make ranks disagree.
template <class Count>
std::vector<std::vector<loom::Plan>> sequencePlans(const Sequence& s, Count count) {
  std::vector<std::vector<loom::Plan>> plans(s.ops.size(), std::vector<loom::Plan>(kSequenceRanks));
  for (size_t k = 0; k < s.ops.size(); ++k)
    for (int r = 0; r < kSequenceRanks; ++r) {
      Case c = s.ops[k].c;
      c.count = count(k, r);
      EXPECT_TRUE(loom::buildPlan(c.algo, requestFor(c, r), &plans[k][r]).ok()) << describe(c);
    }
  return plans;
}

// One rank's memory: A with its initial values, G, then every operation's scratch; stale bytes
// everywhere else, guards included.
RankMemory sequenceMemory(const Sequence& s, const std::vector<std::vector<loom::Plan>>& plans, int rank) {
  const loomDataType_t dtype = s.ops[0].c.dtype;
  const size_t es = loom::dataTypeSize(dtype);
  RankMemory m;
  auto add = [&](uint64_t elems) { m.blocks.push_back(std::make_unique<GuardedBlock>(elems * es, 0)); };
  add(s.elemsA);
  add(s.elemsG);
  for (const std::vector<loom::Plan>& op : plans) add(op[rank].scratchElems);
  for (size_t b = 0; b < m.blocks.size(); ++b)
    loomtest::fillPattern(const_cast<char*>(m.blocks[b]->whole()), m.blocks[b]->wholeBytes(), 77,
                          static_cast<int>(rank * 10 + b), 0);
  for (uint64_t i = 0; i < s.elemsA; ++i) storeValue(dtype, initialValue(rank, i), m.blocks[kBlockA]->data() + i * es);
  return m;
}

RankRun runOf(const Sequence& s, const std::vector<std::vector<loom::Plan>>& plans, size_t k, int rank,
              const RankMemory& m) {
  const size_t es = loom::dataTypeSize(s.ops[k].c.dtype);
  auto at = [&](Place p) { return m.blocks[p.block]->data() + p.at * es; };
  const loom::Plan& plan = plans[k][rank];
  return RankRun{&plan, {at(s.ops[k].send), at(s.ops[k].recv), plan.scratchElems ? m.blocks[2 + k]->data() : nullptr}};
}

std::vector<std::vector<SequencedRun>> sequencedRuns(const Sequence& s,
                                                     const std::vector<std::vector<loom::Plan>>& plans,
                                                     const std::vector<RankMemory>& memory) {
  std::vector<std::vector<SequencedRun>> ranks(kSequenceRanks);
  for (int r = 0; r < kSequenceRanks; ++r)
    for (size_t k = 0; k < s.ops.size(); ++k)
      ranks[r].push_back({runOf(s, plans, k, r, memory[r]), planOp(s.ops[k].c)});
  return ranks;
}

// What A and G must hold in the end, [rank][block][element], from what the operations mean.
std::vector<std::vector<std::vector<int64_t>>> expectedValues(const Sequence& s) {
  std::vector<std::vector<std::vector<int64_t>>> v(kSequenceRanks);
  for (int r = 0; r < kSequenceRanks; ++r) {
    v[r] = {std::vector<int64_t>(s.elemsA), std::vector<int64_t>(s.elemsG)};
    for (uint64_t i = 0; i < s.elemsA; ++i) v[r][kBlockA][i] = initialValue(r, i);
  }
  for (const SequenceOp& op : s.ops) {
    const uint64_t n = op.c.count;
    auto in = [&](int r, uint64_t i) { return v[r][op.send.block][op.send.at + i]; };
    auto out = [&](int r, uint64_t i) -> int64_t& { return v[r][op.recv.block][op.recv.at + i]; };
    for (uint64_t i = 0; i < n; ++i) {
      if (op.c.coll == Collective::AllReduce) {
        const int64_t sum = in(0, i) + in(1, i) + in(2, i);
        for (int r = 0; r < kSequenceRanks; ++r) out(r, i) = sum;
      } else if (op.c.coll == Collective::Broadcast) {
        const int64_t root = in(op.c.root, i);
        for (int r = 0; r < kSequenceRanks; ++r) out(r, i) = root;
      } else {  // AllGather, out of place
        for (int r = 0; r < kSequenceRanks; ++r)
          for (int j = 0; j < kSequenceRanks; ++j) out(r, j * n + i) = in(j, i);
      }
    }
  }
  return v;
}

std::string checkExpected(const Sequence& s, const std::vector<RankMemory>& memory) {
  const loomDataType_t dtype = s.ops[0].c.dtype;
  const size_t es = loom::dataTypeSize(dtype);
  const auto want = expectedValues(s);
  for (int r = 0; r < kSequenceRanks; ++r)
    for (size_t b : {kBlockA, kBlockG})
      for (size_t i = 0; i < want[r][b].size(); ++i) {
        const int64_t got = loadValue(dtype, memory[r].blocks[b]->data() + i * es);
        if (got != want[r][b][i])
          return fmt::format("rank {} {}[{}] is {}, expected {}", r, b == kBlockA ? "A" : "G", i, got, want[r][b][i]);
      }
  return "";
}

// Runs the sequence in one launch per rank and checks it against the reference run of its operations
// one by one, in order, on a copy of the same memory, and against the values they must produce; over
// FIFOs with or without direct-mode posts, with messages up to lowLatencyBytes as low-latency words.
std::string runChainedSequence(const Sequence& s, bool direct, uint64_t lowLatencyBytes) {
  const Case& first = s.ops[0].c;
  const std::string what = fmt::format("{} count={} w={}{} ll<={}", loomtest::dtypeName(first.dtype), first.count,
                                       first.workersPerLane, direct ? " direct" : "", lowLatencyBytes);
  const auto plans = sequencePlans(s, [&](size_t k, int) { return s.ops[k].c.count; });
  std::vector<RankMemory> emulated, reference;
  for (int r = 0; r < kSequenceRanks; ++r) {
    emulated.push_back(sequenceMemory(s, plans, r));
    reference.push_back(sequenceMemory(s, plans, r));
  }
  const HostFifoMesh mesh(kSequenceRanks, 2, kSlots, kSlotBytes, direct);
  uint32_t abortWord = 0;
  EmulationOptions options;
  options.workersPerLane = first.workersPerLane;
  options.abort = &abortWord;
  options.lowLatencyBytes = lowLatencyBytes;
  const auto results = runSequenceEmulated(sequencedRuns(s, plans, emulated), mesh, first.dtype, options);
  for (size_t k = 0; k < s.ops.size(); ++k) {
    std::vector<loom::Status> op;
    for (int r = 0; r < kSequenceRanks; ++r) op.push_back(results[r][k].status);
    if (std::string failure = firstFailure(op); !failure.empty())
      return fmt::format("{}: op {} ({}): {}", what, k, describe(s.ops[k].c), failure);
    std::vector<RankRun> runs;
    for (int r = 0; r < kSequenceRanks; ++r) runs.push_back(runOf(s, plans, k, r, reference[r]));
    if (loom::Status st = runReference(runs, first.dtype, planOp(s.ops[k].c)); !st.ok())
      return fmt::format("{}: reference op {}: {}", what, k, st.message());
  }
  if (std::string diff = compareRuns(emulated, reference); !diff.empty()) return what + ": " + diff;
  if (std::string wrong = checkExpected(s, emulated); !wrong.empty()) return what + ": " + wrong;
  return "";
}

TEST(PlanSequence, LaterOperationsReadWhatEarlierOnesWrote) {
  for (auto [dtype, count, workers] :
       {std::tuple{loomInt32, uint64_t{7}, 1u}, std::tuple{loomInt32, uint64_t{2501}, 1u},
        std::tuple{loomFloat32, uint64_t{10001}, 1u}, std::tuple{loomInt32, uint64_t{2501}, 2u},
        std::tuple{loomFloat32, uint64_t{1001}, 2u}})
    for (bool direct : {false, true})
      EXPECT_EQ(runChainedSequence(chainedSequence(dtype, count, workers), direct, direct ? 1024 : 0), "");
}

// How a sequence's run is made to fail in operation `failing`.
enum class Fault { CountMismatch, AbortedBeforeTheRun };
struct SequenceFault {
  Fault fault;
  size_t failing;
};

using Outcome = loom::cuda::DeviceLaneOutcome;

// Whether every lane of the plan ended in one of `outcomes`.
bool lanesEndedIn(const SequencedResult& plan, std::initializer_list<Outcome> outcomes) {
  return std::all_of(plan.lanes.begin(), plan.lanes.end(), [&](const loom::cuda::DeviceLaneStatus& lane) {
    return std::find(outcomes.begin(), outcomes.end(), static_cast<Outcome>(lane.outcome)) != outcomes.end();
  });
}

// A failed plan raises the abort word; the blocks then meet, see it, and start no further plan: the
// failing operation reports its cause, the later ones say that none of their lanes reported (checked
// lane by lane: one that started and then saw the abort would hide behind one that did not), and
// nothing waits out the timeout.
TEST(PlanSequence, AFailedPlanEndsTheRunAndTheLaterPlansNeverStart) {
  for (SequenceFault f : {SequenceFault{Fault::CountMismatch, 0}, SequenceFault{Fault::CountMismatch, 1},
                          SequenceFault{Fault::AbortedBeforeTheRun, 0}}) {
    SCOPED_TRACE(fmt::format("{} in op {}", f.fault == Fault::CountMismatch ? "count mismatch" : "abort", f.failing));
    const Sequence s = chainedSequence(loomFloat32, 65537, 1);
    // Rank 0 alone runs the failing operation on half the elements: every message it sends or
    // expects has another size.
    const auto plans = sequencePlans(s, [&](size_t k, int r) {
      const uint64_t n = s.ops[k].c.count;
      return f.fault == Fault::CountMismatch && k == f.failing && r == 0 ? n / 2 : n;
    });
    std::vector<RankMemory> memory;
    for (int r = 0; r < kSequenceRanks; ++r) memory.push_back(sequenceMemory(s, plans, r));
    const HostFifoMesh mesh(kSequenceRanks, 2, kSlots, kSlotBytes);
    uint32_t abortWord = f.fault == Fault::AbortedBeforeTheRun ? 1 : 0;
    EmulationOptions options;
    options.abort = &abortWord;
    options.timeoutNs = 2'000'000'000;
    const auto start = std::chrono::steady_clock::now();
    const auto results = runSequenceEmulated(sequencedRuns(s, plans, memory), mesh, loomFloat32, options);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1000));
    EXPECT_EQ(abortWord, 1u);
    bool mismatchSeen = false;
    for (int r = 0; r < kSequenceRanks; ++r)
      for (size_t k = 0; k < s.ops.size(); ++k) {
        const SequencedResult& plan = results[r][k];
        const loom::Status& st = plan.status;
        SCOPED_TRACE(fmt::format("rank {} op {}: {}", r, k, st.message()));
        if (k < f.failing) {
          EXPECT_TRUE(st.ok());
        } else if (k > f.failing) {
          EXPECT_NE(st.message().find("did not report"), std::string::npos);
          EXPECT_TRUE(lanesEndedIn(plan, {Outcome::NotReported}));
        } else if (f.fault == Fault::AbortedBeforeTheRun) {
          EXPECT_EQ(st.code(), loomRemoteError);
          EXPECT_NE(st.message().find("aborted while waiting"), std::string::npos);
        } else if (k == 0) {
          // Every block starts the first plan: each rank reports the mismatch or the abort it raised.
          EXPECT_TRUE(lanesEndedIn(plan, {Outcome::SizeMismatch, Outcome::Aborted}));
          EXPECT_TRUE(st.code() == loomInvalidUsage || st.code() == loomRemoteError);
        } else {
          // Rank 0's failure raises the (shared) abort word while another rank's blocks may still be
          // meeting after the plan before: those do not start this one.
          EXPECT_TRUE(lanesEndedIn(plan, {Outcome::SizeMismatch, Outcome::Aborted, Outcome::NotReported}));
          // The result names what a lane saw (devicePlanResult ranks a silent lane last).
          if (!lanesEndedIn(plan, {Outcome::NotReported})) {
            EXPECT_EQ(st.message().find("did not report"), std::string::npos);
          }
        }
        for (const loom::cuda::DeviceLaneStatus& lane : plan.lanes)
          mismatchSeen = mismatchSeen || static_cast<Outcome>(lane.outcome) == Outcome::SizeMismatch;
      }
    EXPECT_EQ(mismatchSeen, f.fault == Fault::CountMismatch);
  }
}

// One end of a rank pair's FIFOs worked by hand, as the peer rank would: for pacing that no plan can.
// Each call gives up (false, or no message) after `patience`.
class HandPeer {
 public:
  HandPeer(const loom::cuda::DeviceFifo& out, const loom::cuda::DeviceFifo& in) : out_(out), in_(in) {}

  bool send(const std::vector<char>& message, std::chrono::milliseconds patience) {
    if (!waitFor([&] { return load(out_.head) + out_.nslots >= sent_ + 1; }, patience)) return false;
    std::memcpy(out_.slots + (sent_ % out_.nslots) * out_.slotBytes, message.data(), message.size());
    out_.sizes[sent_ % out_.nslots] = message.size();
    std::atomic_ref<uint64_t>(*out_.tail).store(++sent_, std::memory_order_release);
    return true;
  }
  std::vector<char> recv(std::chrono::milliseconds patience) {
    if (!waitFor([&] { return load(in_.tail) >= received_ + 1; }, patience)) return {};
    const char* slot = in_.slots + (received_ % in_.nslots) * in_.slotBytes;
    std::vector<char> message(slot, slot + in_.sizes[received_ % in_.nslots]);
    std::atomic_ref<uint64_t>(*in_.head).store(++received_, std::memory_order_release);
    return message;
  }

 private:
  template <class Ready>
  static bool waitFor(Ready ready, std::chrono::milliseconds patience) {
    const auto giveUp = std::chrono::steady_clock::now() + patience;
    for (; !ready(); std::this_thread::yield())
      if (std::chrono::steady_clock::now() > giveUp) return false;
    return true;
  }
  static uint64_t load(uint64_t* p) { return std::atomic_ref<uint64_t>(*p).load(std::memory_order_acquire); }
  loom::cuda::DeviceFifo out_, in_;
  uint64_t sent_ = 0, received_ = 0;
};

// The plan's timeout bounds a wait without progress, not a plan: a block whose lane ended early waits
// at the meeting for as long as the others keep making progress. Rank 0's first plan receives
// messages that rank 1 (played by hand) sends 10 ms apart, 200 ms in all, while its other block only
// copies locally; its second plan needs both blocks.
TEST(PlanSequence, ABlockThatEndedEarlyWaitsForTheOthersLongerThanTheTimeout) {
  constexpr uint64_t kMessages = 20, kSlot = 16;
  const HostFifoMesh mesh(2, 1, kSlots, kSlot);
  loom::Plan slow, both;
  ASSERT_TRUE(
      loom::buildP2pPlan(2, 0, {{false, 1, kMessages * kSlot}, {true, 0, 8}, {false, 0, 8}}, kSlot, &slow).ok());
  ASSERT_TRUE(loom::buildP2pPlan(2, 0, {{false, 1, 8}, {true, 1, 8}}, kSlot, &both).ok());
  std::vector<char> memory(kMessages * kSlot + 32, 'm');
  char* p = memory.data();
  char* got = p + kMessages * kSlot;
  const std::vector<std::vector<SequencedRun>> rank0 = {{{{&slow, {nullptr, nullptr, nullptr, p, got, got + 8}}, {}},
                                                         {{&both, {nullptr, nullptr, nullptr, got + 16, p}}, {}}}};
  std::vector<char> answer;
  std::thread rank1([&] {
    HandPeer peer(mesh.sends(1)[0], mesh.recvs(1)[0]);
    const std::chrono::milliseconds patience(1000);
    bool sent = true;
    for (uint64_t i = 0; i < kMessages && sent; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      sent = peer.send(std::vector<char>(kSlot, static_cast<char>('a' + i)), patience);
    }
    if (sent && peer.send(std::vector<char>(8, 'z'), patience)) answer = peer.recv(patience);
  });
  uint32_t abortWord = 0;
  EmulationOptions options;
  options.abort = &abortWord;
  options.timeoutNs = 100'000'000;
  const auto results = runSequenceEmulated(rank0, mesh, loomUint8, options);
  rank1.join();
  for (const SequencedResult& plan : results[0]) EXPECT_TRUE(plan.status.ok()) << plan.status.message();
  EXPECT_EQ(std::string(got + 16, 8), std::string(8, 'z'));
  EXPECT_EQ(std::string(answer.begin(), answer.end()), std::string(8, 'a'));
}

}  // namespace
}  // namespace loomgpu
