// Files Loom must refuse with a clear message and without crashing.
#include <gtest/gtest.h>

#include "fixtures.h"

namespace loom {
namespace {

Status loadText(const std::string& name, const std::string& text) {
  SystemGraph g;
  return loadTopologyFile(testing::writeTempFile(name, text), &g);
}

void expectRefused(const Status& s, const std::string& needle) {
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), loomInvalidArgument);
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
}

TEST(BadFiles, MissingFile) {
  SystemGraph g;
  expectRefused(loadTopologyFile("/nonexistent/loom/topo.xml", &g), "cannot open topology file");
}

TEST(BadFiles, Garbage) {
  std::string noise;
  for (int i = 0; i < 4096; ++i) noise.push_back(static_cast<char>((i * 7919 + 13) % 256));
  expectRefused(loadText("garbage.bin", noise), "not a topology file");
  expectRefused(loadText("empty.xml", ""), "not a topology file");
  expectRefused(loadText("text.xml", "hello, world\n"), "not a topology file");
}

TEST(BadFiles, OtherXml) {
  expectRefused(loadText("svg.xml", "<svg xmlns=\"http://www.w3.org/2000/svg\"/>"), "root element <svg>");
}

TEST(BadFiles, Hwloc3VersionInline) {
  expectRefused(loadText("v3.xml", "<?xml version=\"1.0\"?><topology version=\"3.0\"><object type=\"Machine\"/></topology>"),
                "hwloc XML version 3.0 is not supported");
}

TEST(BadFiles, TruncatedFixturesAtManyPoints) {
  for (const char* name : {"hwloc-dgx2-16xV100-nvswitch.xml", "nccl-hgx-8xA100-nvswitch-4xcx6.xml"}) {
    std::string path = testing::fixturePath(name);
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "topology fixture " << path << " is absent";
    std::string text = testing::readFile(path);
    for (size_t cut : {size_t{1}, size_t{100}, text.size() / 3, text.size() / 2, text.size() - 20}) {
      SystemGraph g;
      Status s = parseTopologyXml(text.substr(0, cut), "truncated", &g);
      EXPECT_FALSE(s.ok()) << name << " cut at " << cut;
      EXPECT_EQ(s.code(), loomInvalidArgument);
    }
  }
}

TEST(BadFiles, WellFormedButWrongNcclContent) {
  expectRefused(loadText("nocpu.xml", "<system version=\"1\"/>"), "no <cpu>");
  expectRefused(loadText("badbus.xml", "<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"zz\" class=\"0x030200\"/></cpu></system>"),
                "bad busid");
}

TEST(BadFiles, WellFormedButBrokenHwloc) {
  // hwloc itself rejects it; Loom reports that instead of crashing.
  Status s = loadText("brokenhwloc.xml", "<topology version=\"2.0\"><object type=\"NoSuchType\"/></topology>");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), loomInvalidArgument);
}

TEST(BadFiles, GraphMustBeEmpty) {
  SystemGraph g;
  g.addNode(Node{});
  EXPECT_FALSE(parseTopologyXml("<system version=\"1\"><cpu numaid=\"0\"/></system>", "x", &g).ok());
}

TEST(BadFiles, MinimalNcclFileIsFine) {
  SystemGraph g;
  Status s = parseTopologyXml("<system version=\"1\"><cpu numaid=\"0\" affinity=\"0000000f\"/></system>", "x", &g);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(g.gpuCount(), 0);
  EXPECT_EQ(g.node(g.cpus()[0]).cpuList, "0-3");
}

}  // namespace
}  // namespace loom
