// Low-latency messages of the plan interpreter (kernels/cuda/device_plan_layout.h's kLowLatencyBytes),
// run on the host: a small message travels as words that carry their own flag, through the FIFO's
// low-latency slots only (the regular slot, the size word and the direct-mode posts stay untouched),
// whichever side comes first; a receiver whose words never come times out or sees an abort, naming the
// sender, with any number of workers; every later message of the slot carries another flag. Whole
// collectives with low-latency messages, alone or mixed with slot messages on the same FIFOs, run in
// test_plan_interpreter_emulated.cc's matrix (two thirds of its cases) and in the plan sequences.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "plan_cases.h"

namespace loomgpu {
namespace {

using loom::cuda::kLowLatencyBytes;
using loom::cuda::kLowLatencySlotBytes;

constexpr unsigned char kNeverWritten = 0xEE;  // what a slot holds when nothing was ever written into it
constexpr uint32_t kLateStartMs = 200;        // how long one side waits before it starts

// Rank 0 sends `bytes` to rank 1 `messages` times (one lone send/receive per run, over the same mesh).
struct SmallMessage {
  HostFifoMesh mesh{2, 1, kSlots, kSlotBytes, /*directPosts=*/true};
  loom::Plan send, recv;
  std::vector<char> source, destination;
  uint64_t bytes;

  explicit SmallMessage(uint64_t n) : source(n), destination(n + 64, 0), bytes(n) {
    EXPECT_TRUE(loom::buildP2pPlan(2, 0, {{true, 1, n}}, kSlotBytes, &send).ok());
    EXPECT_TRUE(loom::buildP2pPlan(2, 1, {{false, 0, n}}, kSlotBytes, &recv).ok());
    std::memset(mesh.view(0, 1, 0).slots, kNeverWritten, kSlots * kSlotBytes);
  }

  std::vector<loom::Status> run(uint32_t senderDelayMs, uint32_t receiverDelayMs, uint32_t workers = 1,
                                uint64_t timeoutNs = 10'000'000'000ull, bool senderRuns = true,
                                uint32_t* abortWord = nullptr) {
    for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<char>(i * 7 + 1 + runs);
    ++runs;
    EmulationOptions options;
    uint32_t ownAbort = 0;
    options.abort = abortWord ? abortWord : &ownAbort;
    options.timeoutNs = timeoutNs;
    options.workersPerLane = workers;
    options.lowLatencyBytes = kLowLatencyBytes;
    options.startDelayMs = {senderDelayMs, receiverDelayMs};
    std::vector<RankRun> ranks{RankRun{&send, {nullptr, nullptr, nullptr, source.data()}},
                               RankRun{&recv, {nullptr, nullptr, nullptr, destination.data()}}};
    if (!senderRuns) {  // the receiver alone: its words never come
      loom::Plan idle;
      idle.nranks = 2;
      ranks[0] = RankRun{&idle, {}};
    }
    return runEmulated(ranks, mesh, loomUint8, loom::ReduceOp{}, options);
  }

  bool received() const { return std::memcmp(destination.data(), source.data(), bytes) == 0; }
  bool regularSlotUntouched() const {
    const char* slot = mesh.view(0, 1, 0).slots;
    for (uint64_t i = 0; i < kSlots * kSlotBytes; ++i)
      if (static_cast<unsigned char>(slot[i]) != kNeverWritten) return false;
    return true;
  }
  uint64_t word(uint32_t slot, uint64_t i) const {
    return reinterpret_cast<const uint64_t*>(mesh.view(0, 1, 0).lowLatencySlots + slot * kLowLatencySlotBytes)[i];
  }
  int runs = 0;
};

TEST(LowLatency, SmallMessagesTravelAsFlaggedWords) {
  for (uint32_t receiverFirst : {0u, 1u}) {
    SmallMessage m(1001);  // not a whole number of words
    const auto results = receiverFirst ? m.run(kLateStartMs, 0) : m.run(0, kLateStartMs);
    ASSERT_TRUE(results[0].ok()) << results[0].message();
    ASSERT_TRUE(results[1].ok()) << results[1].message();
    EXPECT_TRUE(m.received());
    EXPECT_EQ(m.destination[m.bytes], 0) << "written past the destination";
    EXPECT_TRUE(m.regularSlotUntouched()) << "a low-latency message went through the regular slot";
    EXPECT_EQ(m.mesh.view(0, 1, 0).sizes[0], 0u) << "a low-latency message wrote a size word";
    EXPECT_EQ(m.word(0, 0) >> 32, 1u) << "the first message's flag is its sequence number + 1";
    EXPECT_EQ(static_cast<uint32_t>(m.word(0, 0)), 0x160f0801u) << "four data bytes (1, 8, 15, 22) in the low half";
    EXPECT_EQ(*m.mesh.view(0, 1, 0).tail, 1u);
    EXPECT_EQ(*m.mesh.view(0, 1, 0).head, 1u);
  }
}

// Each message of a slot carries a new flag, so data a slot held before never passes for the next.
TEST(LowLatency, EveryMessageOfASlotHasItsOwnFlag) {
  SmallMessage m(64);
  for (int i = 0; i < 2 * static_cast<int>(kSlots) + 1; ++i) {
    const auto results = m.run(i % 2 ? kLateStartMs / 4 : 0, i % 2 ? 0 : kLateStartMs / 4);
    ASSERT_TRUE(results[0].ok() && results[1].ok()) << "message " << i << ": " << results[1].message();
    ASSERT_TRUE(m.received()) << "message " << i;
  }
  EXPECT_EQ(m.word(0, 0) >> 32, 2 * kSlots + 1) << "slot 0's last message was number 2 x slots";
}

TEST(LowLatency, AReceiverWhoseWordsNeverComeTimesOutNamingTheSender) {
  for (uint32_t workers : {1u, 3u}) {
    SmallMessage m(4000);
    const auto results = m.run(0, 0, workers, /*timeoutNs=*/50'000'000ull, /*senderRuns=*/false);
    EXPECT_EQ(results[1].code(), loomTimeout) << results[1].message();
    EXPECT_NE(results[1].message().find("waiting on rank 0"), std::string::npos) << results[1].message();
    for (size_t i = 0; i < m.destination.size(); ++i) ASSERT_EQ(m.destination[i], 0) << "byte " << i;
  }
}

TEST(LowLatency, AnAbortStopsAReceiverPollingItsWords) {
  SmallMessage m(4000);
  uint32_t abortWord = 1;  // raised before the run: the poll sees it at its first check
  const auto results = m.run(0, 0, 2, /*timeoutNs=*/0, /*senderRuns=*/false, &abortWord);
  EXPECT_EQ(results[1].code(), loomRemoteError) << results[1].message();
}

}  // namespace
}  // namespace loomgpu
