// Test files that run both as threads and as processes are compiled twice; LOOM_API_PROCESSES
// selects forked ranks (1..5) instead of threads (1..8).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "harness.h"

namespace loomtest {

#ifdef LOOM_API_PROCESSES
inline constexpr Launch kLaunch = Launch::Processes;
inline constexpr int kMaxRanks = 5;
#else
inline constexpr Launch kLaunch = Launch::Threads;
inline constexpr int kMaxRanks = 8;
#endif

// (transport, nranks) for the parameterised tests: the default transport at 1..kMaxRanks, and a
// few rank counts over sockets and over shm.
struct RanksParam {
  const char* transport;
  int nranks;
};

inline std::vector<RanksParam> ranksParams() {
  std::vector<RanksParam> v;
  for (int n = 1; n <= kMaxRanks; ++n) v.push_back({"", n});
  v.push_back({"socket", 2});
  v.push_back({"socket", kMaxRanks});
  if (kLaunch == Launch::Threads) v.push_back({"shm", 5});
  return v;
}

inline std::string ranksParamName(const ::testing::TestParamInfo<RanksParam>& info) {
  std::string t = *info.param.transport ? info.param.transport : "default";
  return t + "_n" + std::to_string(info.param.nranks);
}

}  // namespace loomtest
