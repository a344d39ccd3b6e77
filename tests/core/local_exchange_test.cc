// The bootstrap's exchanges in memory (bootstrap/local_exchange.h), for communicators whose ranks are
// all threads of one process: rounds one after another give every rank every part, whatever order the
// threads come in; a rank whose bootstrap goes fails the others' waits at once, naming it; parts of
// different sizes, a rank that never comes and an abort are errors, not hangs.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/local_exchange.h"

namespace {

using namespace loom;

TEST(LocalExchange, RoundsGiveEveryRankEveryPart) {
  constexpr int kRanks = 7, kRounds = 200;
  LocalExchange exchange(kRanks);
  std::vector<std::string> problems(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      std::mt19937 rng(static_cast<unsigned>(r));
      for (int round = 0; round < kRounds && problems[r].empty(); ++round) {
        if (rng() % 8 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 500));
        const size_t words = 1 + round % 5;  // every rank the same size in a round, rounds differ
        std::vector<uint32_t> mine(words, static_cast<uint32_t>(round * 100 + r)), all(words * kRanks);
        Status st = exchange.allGather(r, mine.data(), all.data(), words * sizeof(uint32_t), Deadline::afterMs(20000), nullptr);
        if (!st.ok()) problems[r] = st.message();
        for (int q = 0; q < kRanks && problems[r].empty(); ++q)
          for (size_t w = 0; w < words; ++w)
            if (all[q * words + w] != static_cast<uint32_t>(round * 100 + q))
              problems[r] = "round " + std::to_string(round) + ": rank " + std::to_string(q) + "'s part is wrong";
      }
    });
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(problems[r], "") << "rank " << r;
}

TEST(LocalExchange, ARankThatLeavesIsNamedAtOnce) {
  LocalExchange exchange(3);
  std::vector<Status> results(2);
  std::vector<std::thread> waiting;
  for (int r = 0; r < 2; ++r)
    waiting.emplace_back([&, r] {
      int mine = r, all[3];
      results[r] = exchange.allGather(r, &mine, all, sizeof mine, Deadline::afterMs(60000), nullptr);
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto start = std::chrono::steady_clock::now();
  exchange.leave(2);
  for (std::thread& t : waiting) t.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  for (const Status& st : results) {
    EXPECT_EQ(st.code(), loomRemoteError) << st.message();
    EXPECT_NE(st.message().find("rank 2 left"), std::string::npos) << st.message();
  }
}

TEST(LocalExchange, MismatchTimeoutAndAbortAreErrors) {
  {
    LocalExchange exchange(2);
    Status first;
    std::thread rank0([&] {
      int mine = 0, all[2];
      first = exchange.allGather(0, &mine, all, sizeof mine, Deadline::afterMs(300), nullptr);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    double mine = 1, all[2];
    const Status second = exchange.allGather(1, &mine, all, sizeof mine, Deadline::afterMs(300), nullptr);
    rank0.join();
    EXPECT_EQ(second.code(), loomInvalidArgument) << second.message();
    EXPECT_NE(second.message().find("different setups"), std::string::npos) << second.message();
    EXPECT_EQ(first.code(), loomTimeout) << first.message();  // rank 1's part never came
    EXPECT_NE(first.message().find("1 of 2 ranks arrived"), std::string::npos) << first.message();
  }
  {
    LocalExchange exchange(2);
    AbortFlag abort{false};
    std::thread aborter([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      abort = true;
    });
    int mine = 0, all[2];
    const Status st = exchange.allGather(0, &mine, all, sizeof mine, Deadline::afterMs(60000), &abort);
    aborter.join();
    EXPECT_EQ(st.code(), loomRemoteError) << st.message();
    EXPECT_NE(st.message().find("aborted"), std::string::npos) << st.message();
  }
}

TEST(LocalExchange, OneExchangePerCommunicator) {
  const uint8_t a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 5};
  auto first = LocalExchange::join(a, sizeof a, 4);
  EXPECT_EQ(LocalExchange::join(a, sizeof a, 4), first);  // its other ranks
  EXPECT_NE(LocalExchange::join(b, sizeof b, 4), first);  // another communicator
  EXPECT_NE(LocalExchange::join(a, sizeof a, 5), first);
}

}  // namespace
