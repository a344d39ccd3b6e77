// Direct mode of the plan interpreter (kernels/cuda/device_plan_layout.h's DeviceDirectPost), run on
// the host: a receiver that waits with its destination posted gets the message written there and
// its slot is never touched; a sender that comes first uses the slot; a post of another size is never
// written into. Whole collectives over FIFOs with posts run in test_plan_interpreter_emulated.cc's
// matrix (about half of its cases) and in the plan sequences.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "plan_cases.h"

namespace loomgpu {
namespace {

using loom::cuda::kDirectMessage;

constexpr unsigned char kUntouched = 0xEE;  // what a slot holds when nothing was ever written into it
constexpr uint32_t kHeadStartMs = 300;      // how long one side waits before it starts

struct OneMessage {
  HostFifoMesh mesh{2, 1, kSlots, kSlotBytes, /*directPosts=*/true};
  loom::Plan send, recv;
  std::vector<char> source, destination;
  uint64_t bytes = 0;

  // Rank 0 sends `sent` bytes to rank 1, which expects `expected` (the same, unless a test says not).
  OneMessage(uint64_t sent, uint64_t expected) : source(sent), destination(expected + 64, 0), bytes(sent) {
    EXPECT_TRUE(loom::buildP2pPlan(2, 0, {{true, 1, sent}}, kSlotBytes, &send).ok());
    EXPECT_TRUE(loom::buildP2pPlan(2, 1, {{false, 0, expected}}, kSlotBytes, &recv).ok());
    for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<char>(i * 7 + 1);
    std::memset(mesh.view(0, 1, 0).slots, kUntouched, kSlots * kSlotBytes);
  }

  // Over `over` (default: this message's mesh, which has posts).
  std::vector<loom::Status> run(uint32_t senderDelayMs, uint32_t receiverDelayMs, const HostFifoMesh* over = nullptr,
                                uint64_t timeoutNs = 10'000'000'000ull) {
    EmulationOptions options;
    uint32_t abortWord = 0;
    options.abort = &abortWord;
    options.timeoutNs = timeoutNs;
    options.startDelayMs = {senderDelayMs, receiverDelayMs};
    char* src = source.data();
    char* dst = destination.data();
    return runEmulated({RankRun{&send, {nullptr, nullptr, nullptr, src}}, RankRun{&recv, {nullptr, nullptr, nullptr, dst}}},
                       over ? *over : mesh, loomUint8, loom::ReduceOp{}, options);
  }

  uint64_t sizeWord() const { return mesh.view(0, 1, 0).sizes[0]; }
  bool slotUntouched() const {
    const char* slot = mesh.view(0, 1, 0).slots;
    for (uint64_t i = 0; i < kSlotBytes; ++i)
      if (static_cast<unsigned char>(slot[i]) != kUntouched) return false;
    return true;
  }
};

TEST(DirectMode, AWaitingReceiverGetsTheMessageInPlace) {
  OneMessage m(1000, 1000);
  const auto results = m.run(kHeadStartMs, 0);  // the receiver posts long before the sender starts
  ASSERT_TRUE(results[0].ok()) << results[0].message();
  ASSERT_TRUE(results[1].ok()) << results[1].message();
  EXPECT_EQ(std::memcmp(m.destination.data(), m.source.data(), m.bytes), 0);
  EXPECT_EQ(m.sizeWord(), m.bytes | kDirectMessage);
  EXPECT_TRUE(m.slotUntouched()) << "the message went through the slot";
  EXPECT_EQ(m.destination[m.bytes], 0) << "written past the destination";
}

TEST(DirectMode, ASenderThatComesFirstUsesTheSlot) {
  OneMessage m(1000, 1000);
  const auto results = m.run(0, kHeadStartMs);  // no post yet when the sender claims its slot
  ASSERT_TRUE(results[0].ok()) << results[0].message();
  ASSERT_TRUE(results[1].ok()) << results[1].message();
  EXPECT_EQ(std::memcmp(m.destination.data(), m.source.data(), m.bytes), 0);
  EXPECT_EQ(m.sizeWord(), m.bytes);
  EXPECT_EQ(std::memcmp(m.mesh.view(0, 1, 0).slots, m.source.data(), m.bytes), 0);
}

// The receiver posts room for 900 bytes; the sender's 1000 go to the slot, the receiver reports the
// mismatch, and not one byte lands in its memory.
TEST(DirectMode, APostOfAnotherSizeIsNeverWrittenInto) {
  OneMessage m(1000, 900);
  const auto results = m.run(kHeadStartMs, 0);
  EXPECT_TRUE(results[0].ok()) << results[0].message();
  EXPECT_EQ(results[1].code(), loomInvalidUsage);
  EXPECT_NE(results[1].message().find("1000 bytes arrived"), std::string::npos) << results[1].message();
  EXPECT_EQ(m.sizeWord(), uint64_t{1000});
  for (size_t i = 0; i < m.destination.size(); ++i) ASSERT_EQ(m.destination[i], 0) << "byte " << i;
}

// The receiver posts, waits, and gives up (its lane times out) before the sender starts: the late
// sender must not write into the destination, which the caller may have freed or reused by then (on
// the GPU: an illegal address that kills every rank of the process); its message goes to the slot.
TEST(DirectMode, AReceiverThatGaveUpLeavesNoPostBehind) {
  OneMessage m(1000, 1000);
  const auto results = m.run(/*senderDelayMs=*/kHeadStartMs, /*receiverDelayMs=*/0, nullptr,
                             /*timeoutNs=*/50'000'000ull);
  EXPECT_TRUE(results[0].ok()) << results[0].message();  // the sender never waits: its slot is free
  EXPECT_EQ(results[1].code(), loomTimeout) << results[1].message();
  for (size_t i = 0; i < m.destination.size(); ++i) ASSERT_EQ(m.destination[i], 0) << "byte " << i << " written late";
  EXPECT_EQ(m.sizeWord(), m.bytes) << "the message should have gone to the slot";
  EXPECT_EQ(std::memcmp(m.mesh.view(0, 1, 0).slots, m.source.data(), m.bytes), 0);
}

// Without posts in the FIFOs (ranks in different processes) nothing is posted and the slot carries it.
TEST(DirectMode, FifosWithoutPostsUseTheSlots) {
  OneMessage m(1000, 1000);
  const HostFifoMesh plain(2, 1, kSlots, kSlotBytes);
  const auto results = m.run(kHeadStartMs, 0, &plain);  // the receiver waits first, as above
  ASSERT_TRUE(results[1].ok()) << results[1].message();
  EXPECT_EQ(plain.view(0, 1, 0).sizes[0], uint64_t{1000});
  EXPECT_EQ(std::memcmp(plain.view(0, 1, 0).slots, m.source.data(), m.bytes), 0);
}

// Collectives whose ranks start one after the other: the late ones find their receivers' posts, the
// early ones do not, and every result is still right bit for bit (whichever way each message went).
TEST(DirectMode, MixedDeliveriesInOneCollective) {
  using loom::Algorithm;
  using loom::Collective;
  using loomtest::Op;
  for (uint32_t workers : {1u, 3u}) {
    Case allgather{Collective::AllGather, Algorithm::Ring, 4, 0, 5000, loomFloat32, Op::Sum};
    Case allreduce{Collective::AllReduce, Algorithm::Ring, 3, 0, 7001, loomBfloat16, Op::Avg, true};
    Case broadcast{Collective::Broadcast, Algorithm::Tree, 4, 2, 3001, loomInt32, Op::Sum};
    for (Case c : {allgather, allreduce, broadcast}) {
      c.nchannels = 2;
      c.workersPerLane = workers;
      c.direct = true;
      c.staggerMs = 50;
      EXPECT_EQ(runCase(c), "");
    }
  }
}

}  // namespace
}  // namespace loomgpu
