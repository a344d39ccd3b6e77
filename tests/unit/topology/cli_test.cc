// The built loom-topo binary (LOOM_TOPO_BIN, set by meson): exit codes, messages, JSON shape.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include "fixtures.h"

namespace loom {
namespace {

struct ToolRun {
  int exitCode = -1;
  std::string out, err;
};

std::string shellQuoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

ToolRun runTool(const std::string& args, const std::string& env = "") {
  const char* bin = std::getenv("LOOM_TOPO_BIN");
  ToolRun r;
  if (!bin) return r;
  std::string out = ::testing::TempDir() + "/loom_topo_cli.out", err = ::testing::TempDir() + "/loom_topo_cli.err";
  std::string cmd = "env -u LOOM_TOPO_FILE " + env + " " + shellQuoted(bin) + " " + args + " >" + shellQuoted(out) + " 2>" + shellQuoted(err);
  int status = std::system(cmd.c_str());
  r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = testing::readFile(out);
  r.err = testing::readFile(err);
  return r;
}

class LoomTopoCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::getenv("LOOM_TOPO_BIN")) GTEST_SKIP() << "LOOM_TOPO_BIN is not set (run through meson test)";
  }
};

TEST_F(LoomTopoCli, LiveMachine) {
  ToolRun r = runTool("");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("CPUs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NUMA"), std::string::npos) << r.out;
  ToolRun j = runTool("--json");
  ASSERT_EQ(j.exitCode, 0) << j.err;
  nlohmann::json doc = nlohmann::json::parse(j.out);
  EXPECT_FALSE(doc["cpus"].empty());
  EXPECT_TRUE(doc["gpus"].is_array());
  if (!std::filesystem::exists("/dev/nvidia0")) {
    EXPECT_TRUE(doc["gpus"].empty());
    EXPECT_NE(r.out.find("No GPUs found."), std::string::npos);
  }
}

TEST_F(LoomTopoCli, Dgx2Json) {
  LOOM_FIXTURE_OR_SKIP(path, "hwloc-dgx2-16xV100-nvswitch.xml");
  ToolRun r = runTool("--topo " + shellQuoted(path) + " --json");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  nlohmann::json doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["gpus"].size(), 16u);
  EXPECT_TRUE(doc["nics"].is_array());
  ASSERT_EQ(doc["paths"].size(), 16u);
  ASSERT_EQ(doc["paths"][0].size(), 16u);
  EXPECT_EQ(doc["paths"][0][0]["type"], "LOC");
  EXPECT_EQ(doc["paths"][0][1]["type"], "NVL");
  EXPECT_GE(doc["paths"][0][1]["bw_gbs"].get<double>(), 100.0);
  ASSERT_FALSE(doc["rings"].empty());
  EXPECT_EQ(doc["rings"][0].size(), 16u);
  EXPECT_EQ(doc["trees"].size(), 2u);
}

TEST_F(LoomTopoCli, HgxTableAndNcclXmlDump) {
  LOOM_FIXTURE_OR_SKIP(path, "nccl-hgx-8xA100-nvswitch-4xcx6.xml");
  std::string dump = ::testing::TempDir() + "/loom_topo_dump.xml";
  ToolRun r = runTool("--topo " + shellQuoted(path) + " --dump-nccl-xml " + shellQuoted(dump));
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("GPU7"), std::string::npos);
  EXPECT_NE(r.out.find("NVL"), std::string::npos);
  EXPECT_NE(r.out.find("CPU Affinity"), std::string::npos);
  EXPECT_NE(r.out.find("predicted allreduce bus bandwidth 240.0 GB/s"), std::string::npos) << r.out;
  // The dump is NCCL XML Loom reads back (through LOOM_TOPO_FILE this time).
  ToolRun back = runTool("--json", "LOOM_TOPO_FILE=" + shellQuoted(dump));
  ASSERT_EQ(back.exitCode, 0) << back.err;
  nlohmann::json doc = nlohmann::json::parse(back.out);
  EXPECT_EQ(doc["gpus"].size(), 8u);
  EXPECT_EQ(doc["nics"].size(), 5u);
  EXPECT_EQ(doc["paths"][3][5]["type"], "NVL");
}

TEST_F(LoomTopoCli, RefusesUnsupportedFiles) {
  LOOM_FIXTURE_OR_SKIP(hwloc3, "hwloc3-format-dgx2-unsupported.xml");
  ToolRun r = runTool("--topo " + shellQuoted(hwloc3));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("hwloc XML version 3.0 is not supported"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());

  ToolRun missing = runTool("--topo /nonexistent/topo.xml");
  EXPECT_EQ(missing.exitCode, 1);
  EXPECT_NE(missing.err.find("cannot open topology file"), std::string::npos) << missing.err;

  std::string garbage = testing::writeTempFile("cli_garbage.xml", "<system version=\"1\"><cpu numaid=\"0\"><pci");
  ToolRun bad = runTool("--topo " + shellQuoted(garbage) + " --json");
  EXPECT_EQ(bad.exitCode, 1);
  EXPECT_NE(bad.err.find("not a topology file"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace loom
