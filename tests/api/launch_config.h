// How a test binary's ranks run, chosen when the binary starts rather than when it is compiled, so
// that each test source is compiled once: LOOM_TEST_LAUNCH=processes selects forked ranks (1..5),
// anything else threads of this process (1..8). Each meson test runs one launch in a process of its
// own (tests/api/meson.build), so a run that forks rank processes never started thread ranks before.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "harness.h"

namespace loomtest {

// Threads or Processes, from LOOM_TEST_LAUNCH (read once).
Launch testLaunch();
// The most ranks a matrix runs at for that launch: 8 threads, 5 processes.
int maxRanks(Launch launch);
// The rank counts a matrix runs at, up to `most`: by default 1, 2, 3, 4, 5 and 8 (6 and 7 run the code
// 5 and 8 run: odd and even rings, uneven trees and splits); LOOM_TEST_RANKS=all for every count from
// 1, or a list (LOOM_TEST_RANKS=3, =1,2,3,5,8: what the sanitizer runs take). A count above `most` is
// left out.
std::vector<int> rankCounts(int most);

// (transport, nranks) for the parameterised tests: the default transport at each of rankCounts, and a
// few rank counts over sockets and over shm.
struct RanksParam {
  const char* transport;
  int nranks;
};

inline std::vector<RanksParam> ranksParams(Launch launch = testLaunch()) {
  std::vector<RanksParam> v;
  for (int n : rankCounts(maxRanks(launch))) v.push_back({"", n});
  v.push_back({"socket", 2});
  v.push_back({"socket", maxRanks(launch)});
  if (launch == Launch::Threads) v.push_back({"shm", 5});
  return v;
}

inline std::string ranksParamName(const ::testing::TestParamInfo<RanksParam>& info) {
  std::string t = *info.param.transport ? info.param.transport : "default";
  return t + "_n" + std::to_string(info.param.nranks);
}

}  // namespace loomtest
