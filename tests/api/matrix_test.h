// gtest glue shared by the test files that run matrices of cases.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "cases.h"
#include "harness.h"

namespace loomtest {

// Runs spec's cases on nranks ranks and fails the current test with every rank's messages.
inline void expectMatrixPasses(Launch launch, const std::string& transport, int nranks,
                               const std::vector<MatrixSpec>& specs, int timeoutSec = 600) {
  std::vector<Case> cases;
  for (const MatrixSpec& spec : specs) {
    std::vector<Case> more = buildCases(spec, nranks);
    cases.insert(cases.end(), more.begin(), more.end());
  }
  RunOptions options;
  options.transport = transport;
  options.timeoutSec = timeoutSec;
  std::string failures =
      runRanks(launch, nranks, options, [&](RankContext& ctx) { return runCases(ctx, cases); });
  EXPECT_TRUE(failures.empty()) << cases.size() << " cases on " << nranks << " " << launchName(launch)
                                << " ranks, LOOM_TRANSPORT=" << (transport.empty() ? "(unset)" : transport)
                                << ":\n"
                                << failures;
}

inline void expectMatrixPasses(Launch launch, const std::string& transport, int nranks, const MatrixSpec& spec,
                               int timeoutSec = 600) {
  expectMatrixPasses(launch, transport, nranks, std::vector<MatrixSpec>{spec}, timeoutSec);
}

// The full dtype x op cross at counts 0, 1, 3, 1000 and, to keep the time down, rotating
// (dtype, op) pairs at 65537 (each dtype and each op still appear, in and out of place).
inline std::vector<MatrixSpec> fullMatrix(std::vector<Coll> colls) {
  MatrixSpec small{.colls = colls, .counts = {0, 1, 3, 1000}};
  MatrixSpec large{.colls = colls, .counts = {65537}, .crossDtypeOp = false};
  return {small, large};
}

inline std::string rankParamName(const ::testing::TestParamInfo<int>& info) {
  std::string name = "n";
  name += std::to_string(info.param);
  return name;
}

}  // namespace loomtest
