// LOOM_CHECK catches mismatched collectives; LOOM_TRACE_FILE writes a Chrome trace per rank.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "loom.h"
#include "thread_ranks.h"

namespace {

void runThreads(int n, const std::function<void(int, loomComm_t)>& body) {
  runThreadRanks(n, LOOM_CONFIG_INITIALIZER, body);
}

TEST(Observability, CheckReportsMismatchedCollectives) {
  setenv("LOOM_CHECK", "1", 1);
  runThreads(2, [](int rank, loomComm_t comm) {
    std::vector<float> buf(100, 1.0f);
    size_t count = rank == 0 ? 100 : 50;  // a bug in the "application": counts differ
    EXPECT_EQ(loomAllReduce(buf.data(), buf.data(), count, loomFloat32, loomSum, comm, nullptr), loomInvalidUsage);
    std::string message = loomGetLastError(comm);
    EXPECT_NE(message.find("count 100"), std::string::npos) << message;
    EXPECT_NE(message.find("rank 1 called"), std::string::npos) << message;
    EXPECT_EQ(buf[0], 1.0f);  // nothing moved
    // Matching calls still work afterwards.
    EXPECT_EQ(loomAllReduce(buf.data(), buf.data(), 100, loomFloat32, loomSum, comm, nullptr), loomSuccess);
    EXPECT_EQ(buf[99], 2.0f);
  });
  unsetenv("LOOM_CHECK");
}

TEST(Observability, TraceFileHoldsOperationsAndSteps) {
  std::string dir = "/tmp/loom-trace-" + std::to_string(getpid());
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  setenv("LOOM_TRACE_FILE", (dir + "/trace-%r.json").c_str(), 1);
  runThreads(3, [](int, loomComm_t comm) {
    std::vector<int32_t> buf(100000, 1);
    EXPECT_EQ(loomAllReduce(buf.data(), buf.data(), buf.size(), loomInt32, loomSum, comm, nullptr), loomSuccess);
  });
  unsetenv("LOOM_TRACE_FILE");
  for (int r = 0; r < 3; ++r) {
    std::ifstream in(dir + "/trace-" + std::to_string(r) + ".json");
    ASSERT_TRUE(in.good()) << "rank " << r;
    nlohmann::json trace = nlohmann::json::parse(in);
    int ops = 0, steps = 0;
    for (const auto& e : trace["traceEvents"]) {
      if (e.value("cat", "") == "op") ++ops;
      if (e.value("cat", "") == "step") {
        ++steps;
        EXPECT_GE(e["dur"].get<double>(), 0.0);
      }
    }
    EXPECT_EQ(ops, 1);
    EXPECT_GE(steps, 4);  // ring allreduce on 3 ranks: 2 reduce-scatter + 2 allgather steps at least
  }
  std::system(("rm -rf " + dir).c_str());
}

// A communicator's name is the user's text: quotes, backslashes and control characters come back
// from the trace file as they went in (the file is written by a JSON library, not by hand).
TEST(Observability, TraceFileKeepsAnyCommunicatorName) {
  const std::string dir = "/tmp/loom-trace-name-" + std::to_string(getpid());
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  setenv("LOOM_TRACE_FILE", (dir + "/trace-%r.json").c_str(), 1);
  const std::string name = "odd \"name\" \\ with\ttab,\nnewline and \x01";
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.commName = name.c_str();
  runThreadRanks(2, config, [](int, loomComm_t comm) {
    std::vector<float> buf(64, 1.0f);
    EXPECT_EQ(loomAllReduce(buf.data(), buf.data(), buf.size(), loomFloat32, loomSum, comm, nullptr), loomSuccess);
  });
  unsetenv("LOOM_TRACE_FILE");
  for (int r = 0; r < 2; ++r) {
    std::ifstream in(dir + "/trace-" + std::to_string(r) + ".json");
    ASSERT_TRUE(in.good()) << "rank " << r;
    const nlohmann::json trace = nlohmann::json::parse(in);
    EXPECT_EQ(trace["otherData"]["comm"].get<std::string>(), name);
    EXPECT_EQ(trace["otherData"]["rank"].get<int>(), r);
  }
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
