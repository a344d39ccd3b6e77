// The wait policy's memory (core/run/wait_history.h): how long a waiter spins after the last waits ended
// early, late, or both.
#include "core/run/wait_history.h"

#include <gtest/gtest.h>

namespace loom {
namespace {

constexpr int64_t kSpin = 2'000'000;  // LOOM_SPIN_US's default, 2 ms
constexpr int64_t kBrief = WaitHistory::kBriefSpinNs;

void recordMany(WaitHistory& h, size_t n, int64_t ns) {
  for (size_t i = 0; i < n; ++i) h.record(ns);
}

TEST(WaitHistory, FullSpinUntilItHasSeenAWindowOfWaits) {
  WaitHistory h;
  EXPECT_EQ(h.spinBudget(kSpin), kSpin);
  recordMany(h, WaitHistory::kWindow - 1, 10 * kSpin);
  EXPECT_EQ(h.spinBudget(kSpin), kSpin);
}

TEST(WaitHistory, WaitsThatAllOutlastTheWindowLeaveABriefSpin) {
  WaitHistory h;
  recordMany(h, WaitHistory::kWindow, 10 * kSpin);  // a straggler computing for 20 ms
  EXPECT_EQ(h.spinBudget(kSpin), kBrief);
}

TEST(WaitHistory, SpinsTwiceTheLongestWaitThatEndedInsideTheWindow) {
  WaitHistory h;
  recordMany(h, WaitHistory::kWindow, 10 * kSpin);
  h.record(300'000);  // one wait of 0.3 ms among long ones
  EXPECT_EQ(h.spinBudget(kSpin), 600'000);
  h.record(1'500'000);  // 2 x 1.5 ms is capped at the configured spin
  EXPECT_EQ(h.spinBudget(kSpin), kSpin);
}

TEST(WaitHistory, ShortWaitsKeepAtLeastTheBriefSpin) {
  WaitHistory h;
  recordMany(h, WaitHistory::kWindow, 1'000);  // ping-pong: microseconds
  EXPECT_EQ(h.spinBudget(kSpin), kBrief);
}

TEST(WaitHistory, ForgetsWaitsOlderThanTheWindow) {
  WaitHistory h;
  h.record(1'000'000);
  recordMany(h, WaitHistory::kWindow - 1, 10 * kSpin);
  EXPECT_EQ(h.spinBudget(kSpin), kSpin);  // 2 x 1 ms, still remembered
  h.record(10 * kSpin);
  EXPECT_EQ(h.spinBudget(kSpin), kBrief);  // pushed out
}

TEST(WaitHistory, AFixedSpinOrAShortOneIsKept) {
  WaitHistory fixed(true);  // LOOM_SPIN_US set
  recordMany(fixed, WaitHistory::kWindow, 10 * kSpin);
  EXPECT_EQ(fixed.spinBudget(kSpin), kSpin);
  WaitHistory h;
  recordMany(h, WaitHistory::kWindow, 10 * kSpin);
  EXPECT_EQ(h.spinBudget(5'000), 5'000);  // oversubscribed ranks spin 5 us: nothing to shorten
}

}  // namespace
}  // namespace loom
