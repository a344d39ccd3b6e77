// The core tests' ranks: threads of this process, each with its own communicator.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <thread>
#include <vector>

#include "loom.h"

// Who ends a rank's communicator: this helper once body returns, or body itself (it aborts, shrinks...).
enum class CommOwner { Helper, Body };

// Runs body(rank, comm) on n threads; each rank's communicator is made from `config` and destroyed
// when body returns, unless body owns it.
inline void runThreadRanks(int n, const loomConfig_t& config, const std::function<void(int, loomComm_t)>& body,
                           CommOwner owner = CommOwner::Helper) {
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      loomConfig_t mine = config;
      loomComm_t comm = nullptr;
      ASSERT_EQ(loomCommInitRankConfig(&comm, n, id, r, &mine), loomSuccess) << loomGetLastError(nullptr);
      body(r, comm);
      if (owner == CommOwner::Helper) {
        EXPECT_EQ(loomCommDestroy(comm), loomSuccess);
      }
    });
  for (auto& t : threads) t.join();
}
