// loom-sim as a user runs it (LOOM_SIM_BIN): JSON keys, sizes in order, times that never decrease, the
// issue's acceptance shapes, and errors for bad arguments.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

struct SimRun {
  int status = -1;
  std::string out;
};

SimRun runSim(const std::string& args) {
  SimRun run;
  const char* bin = std::getenv("LOOM_SIM_BIN");
  if (bin == nullptr) return run;
  FILE* pipe = popen((std::string(bin) + " " + args + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[4096];
  size_t got = 0;
  while ((got = fread(buffer, 1, sizeof buffer, pipe)) > 0) run.out.append(buffer, got);
  run.status = pclose(pipe);
  return run;
}

nlohmann::json runJson(const std::string& args) {
  const SimRun run = runSim(args + " --json");
  EXPECT_EQ(run.status, 0) << run.out;
  return nlohmann::json::parse(run.out, nullptr, false);
}

class LoomSim : public testing::Test {
 protected:
  void SetUp() override {
    if (std::getenv("LOOM_SIM_BIN") == nullptr) GTEST_SKIP() << "LOOM_SIM_BIN is not set";
  }
};

TEST_F(LoomSim, JsonRowsHaveTheKeysAndGrow) {
  const nlohmann::json rows = runJson("all_reduce --ranks 8 --intra-gbs 100 --latency-us 2 -b 8 -e 4G -f 2");
  ASSERT_TRUE(rows.is_array());
  ASSERT_EQ(rows.size(), 30u);  // 8 B .. 4 GiB
  double previousTime = 0;
  uint64_t previousBytes = 0;
  for (const nlohmann::json& row : rows) {
    for (const char* key : {"bytes", "algorithm", "channels", "time_us", "algbw_gbs", "busbw_gbs"})
      ASSERT_TRUE(row.contains(key)) << key << " missing in " << row.dump();
    EXPECT_GT(row["bytes"].get<uint64_t>(), previousBytes);
    EXPECT_GE(row["time_us"].get<double>(), previousTime * 0.999) << row.dump();
    EXPECT_NEAR(row["busbw_gbs"].get<double>(), row["algbw_gbs"].get<double>() * 2 * 7 / 8, 1e-6);
    previousBytes = row["bytes"].get<uint64_t>();
    previousTime = row["time_us"].get<double>();
  }
  EXPECT_EQ(rows.front()["bytes"].get<uint64_t>(), 8u);
  EXPECT_GE(rows.front()["time_us"].get<double>(), 2.0);  // at least one hop
  EXPECT_EQ(rows.back()["bytes"].get<uint64_t>(), uint64_t{4} << 30);
  const double busbw = rows.back()["busbw_gbs"].get<double>();
  EXPECT_GE(busbw, 80);
  EXPECT_LE(busbw, 105);
}

TEST_F(LoomSim, RailOptimizedNodesKeepEveryNicBusy) {
  const nlohmann::json rows = runJson(
      "all_reduce --ranks 64 --ranks-per-node 8 --intra-gbs 200 --nics-per-node 8 --nic-gbs 25 -b 4G -e 4G");
  ASSERT_EQ(rows.size(), 1u);
  const double busbw = rows[0]["busbw_gbs"].get<double>();
  EXPECT_GE(busbw, 100);
  EXPECT_LE(busbw, 210);
}

TEST_F(LoomSim, ThousandRanksSmallMessagesBeatTheRing) {
  const std::string shape = "all_reduce --ranks 1024 --ranks-per-node 8 --intra-gbs 200 --nics-per-node 8 "
                            "--nic-gbs 25 -b 8 -e 8";
  const nlohmann::json tuned = runJson(shape);
  const nlohmann::json ring = runJson(shape + " --algo ring");
  ASSERT_EQ(tuned.size(), 1u);
  ASSERT_EQ(ring.size(), 1u);
  EXPECT_EQ(ring[0]["algorithm"], "ring");
  EXPECT_LE(tuned[0]["time_us"].get<double>() * 2, ring[0]["time_us"].get<double>());
}

TEST_F(LoomSim, BusBandwidthFactorsFollowNcclTests) {
  for (const auto& [coll, factor] : {std::pair<std::string, double>{"all_gather", 3.0 / 4},
                                     {"reduce_scatter", 3.0 / 4}, {"alltoall", 3.0 / 4}, {"broadcast", 1.0},
                                     {"reduce", 1.0}}) {
    const nlohmann::json rows = runJson(coll + " --ranks 4 -b 1M -e 4M -f 4");
    ASSERT_EQ(rows.size(), 2u) << coll;
    for (const nlohmann::json& row : rows)
      EXPECT_NEAR(row["busbw_gbs"].get<double>(), row["algbw_gbs"].get<double>() * factor, 1e-6) << coll;
  }
}

TEST_F(LoomSim, TableAndErrors) {
  const SimRun table = runSim("broadcast --ranks 16 -b 1K -e 64K -f 8");
  EXPECT_EQ(table.status, 0) << table.out;
  EXPECT_NE(table.out.find("busbw"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("tree"), std::string::npos) << table.out;
  EXPECT_NE(runSim("all_reduce --ranks 4 --algo bogus").status, 0);
  EXPECT_NE(runSim("not_a_collective --ranks 4").status, 0);
  EXPECT_NE(runSim("all_reduce --ranks 4 -b 12Q").status, 0);
  EXPECT_NE(runSim("all_reduce").status, 0);
  const SimRun forced = runSim("all_gather --ranks 4 --algo tree -b 1K");
  EXPECT_EQ(forced.status, 0) << forced.out;
  EXPECT_NE(forced.out.find("note: tree does not apply"), std::string::npos) << forced.out;
}

// --algo takes LOOM_ALGO's rules: each size gets the algorithm of the range it falls in (half-open,
// nccl-tests' size), a collective no rule names is tuned, and a malformed rule is an error naming it.
TEST_F(LoomSim, AlgoRulesByCollectiveAndSize) {
  const nlohmann::json rows =
      runJson("all_reduce --ranks 8 -b 1K -e 1M -f 4 --algo allreduce:0-64K:oneshot,64K-:ring");
  ASSERT_EQ(rows.size(), 6u);  // 1K 4K 16K 64K 256K 1M
  for (const nlohmann::json& row : rows) {
    const uint64_t bytes = row["bytes"].get<uint64_t>();
    EXPECT_EQ(row["algorithm"], bytes < (64 << 10) ? "oneshot" : "ring") << row.dump();
  }
  // The sizes of all_gather count every rank's block: 0-4K covers 512 B per rank at 8 ranks.
  const nlohmann::json gather = runJson("all_gather --ranks 8 -b 2K -e 8K -f 2 --algo allgather:0-4K:direct,4K-:ring");
  ASSERT_EQ(gather.size(), 3u);
  EXPECT_EQ(gather[0]["algorithm"], "direct");
  EXPECT_EQ(gather[1]["algorithm"], "ring");
  EXPECT_EQ(gather[2]["algorithm"], "ring");
  // No rule for broadcast: the tuner's choice, as without --algo.
  const nlohmann::json tuned = runJson("broadcast --ranks 16 -b 1K");
  const nlohmann::json ruled = runJson("broadcast --ranks 16 -b 1K --algo allreduce:ring");
  ASSERT_EQ(tuned.size(), 1u);
  ASSERT_EQ(ruled.size(), 1u);
  EXPECT_EQ(ruled[0]["algorithm"], tuned[0]["algorithm"]);
  const SimRun bad = runSim("all_reduce --ranks 4 --algo allreduce:0-64Q:ring");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.out.find("64Q"), std::string::npos) << bad.out;
}

TEST_F(LoomSim, TopologyFileSetsTheNode) {
  const char* fixtures = std::getenv("LOOM_FIXTURES");
  if (fixtures == nullptr) GTEST_SKIP() << "LOOM_FIXTURES is not set";
  const std::string file = std::string(fixtures) + "/hwloc-dgx2-16xV100-nvswitch.xml";
  if (FILE* f = std::fopen(file.c_str(), "r")) {
    std::fclose(f);
  } else {
    GTEST_SKIP() << file << " is absent";
  }
  const SimRun run = runSim("all_reduce --ranks 32 --topo " + file + " -b 1G");
  ASSERT_EQ(run.status, 0) << run.out;
  EXPECT_NE(run.out.find("16 per node"), std::string::npos) << run.out;
  EXPECT_EQ(runSim("all_reduce --ranks 32 --topo /nonexistent.xml").status != 0, true);
}

}  // namespace
