// Host identity, live discovery, LOOM_TOPO_FILE, and the small conversions the importers share.
#include <gtest/gtest.h>
#include <stdlib.h>

#include "fixtures.h"
#include "topology/cpu_mask.h"
#include "topology/hardware.h"
#include "../../api/scoped_env.h"

namespace loom {
namespace {

using loomtest::ScopedEnv;

TEST(HostIdentity, StableAndOverridable) {
  ScopedEnv clear("LOOM_HOSTID", nullptr);
  HostIdentity a = localHostIdentity(), b = localHostIdentity();
  EXPECT_EQ(a.key(), b.key());
  EXPECT_FALSE(a.hostname.empty());
  EXPECT_NE(a.key().find(a.hostname + "/"), std::string::npos);
  EXPECT_NE(a.hash(), 0u);
  HostIdentity rebooted = a;
  rebooted.bootId += "x";
  EXPECT_NE(rebooted.hash(), a.hash());
  ScopedEnv set("LOOM_HOSTID", "rack3-node7");
  EXPECT_EQ(localHostIdentity().key(), "rack3-node7");
  EXPECT_NE(localHostIdentity().hash(), a.hash());
}

TEST(HostIdentity, GroupsRanksByFirstAppearance) {
  EXPECT_EQ(groupRanksByHost({"b/1", "a/2", "b/1", "c/3", "a/2"}), (std::vector<int>{0, 1, 0, 2, 1}));
  EXPECT_EQ(groupRanksByHost(std::vector<uint64_t>{7, 7, 9}), (std::vector<int>{0, 0, 1}));
  EXPECT_TRUE(groupRanksByHost(std::vector<std::string>{}).empty());
}

TEST(LiveDiscovery, ReportsCpusAndNeverFails) {
  SystemGraph g;
  Status s = discoverLocalTopology(&g);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_FALSE(g.cpus().empty());
  EXPECT_FALSE(g.node(g.cpus()[0]).cpuList.empty());
  EXPECT_EQ(g.source, "live");
  GpuChannels ch;
  ASSERT_TRUE(searchChannels(g, {}, &ch).ok());
  if (g.gpuCount() > 0) {
    EXPECT_EQ(static_cast<int>(ch.rings.front().size()), g.gpuCount());
  }
  std::string xml;
  ASSERT_TRUE(writeNcclXml(g, &xml).ok());
  SystemGraph back;
  ASSERT_TRUE(parseTopologyXml(xml, "live view", &back).ok()) << xml;
  EXPECT_EQ(back.gpuCount(), g.gpuCount());
  EXPECT_EQ(back.cpus().size(), g.cpus().size());
}

TEST(LoadSystemTopology, HonoursLoomTopoFile) {
  ScopedEnv file("LOOM_TOPO_FILE", testing::dataPath("pcie-4gpu-2socket.xml").c_str());
  SystemGraph g;
  ASSERT_TRUE(loadSystemTopology(&g).ok());
  EXPECT_EQ(g.gpuCount(), 4);
  ScopedEnv bad("LOOM_TOPO_FILE", "/nonexistent.xml");
  SystemGraph h;
  Status s = loadSystemTopology(&h);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message().rfind("LOOM_TOPO_FILE: ", 0), 0u) << s.message();
}

TEST(Helpers, BusIds) {
  EXPECT_EQ(normalizeBusId("0000:0C:00.0"), "0000:0c:00.0");
  EXPECT_EQ(normalizeBusId("00000000:13:00.0"), "0000:13:00.0");
  EXPECT_EQ(normalizeBusId("3b:00.1"), "0000:3b:00.1");
  EXPECT_EQ(normalizeBusId("0103:00:00.0"), "0103:00:00.0");
  EXPECT_FALSE(normalizeBusId("").has_value());
  EXPECT_FALSE(normalizeBusId("zz:00.0").has_value());
  EXPECT_FALSE(normalizeBusId("0000:13:00.0junk").has_value());
}

TEST(Helpers, PcieRates) {
  EXPECT_NEAR(pciLinkGbs(8, 16), 15.75, 0.01);
  EXPECT_NEAR(pciLinkGbs(16, 16), 31.5, 0.01);
  EXPECT_NEAR(pciLinkGbs(2.5, 1), 0.25, 1e-9);
  EXPECT_EQ(pciLinkGbs(0, 16), 0.0);
}

TEST(Helpers, GpuGenerations) {
  EXPECT_EQ(smFromGpuModel("Tesla V100-SXM3-32GB-H"), 70);
  EXPECT_EQ(smFromGpuModel("NVIDIA A100-SXM4-80GB"), 80);
  EXPECT_EQ(smFromGpuModel("NVIDIA GH200 480GB"), 90);
  EXPECT_EQ(smFromGpuModel("GP100GL [Tesla P100 PCIe 16GB]"), 60);
  EXPECT_EQ(smFromGpuModel("ASPEED Graphics Family"), 0);
}

TEST(Helpers, CpuMasks) {
  EXPECT_EQ(ncclMaskToCpuList("00000000,ffffffff,00000000,ffffffff"), "0-31,64-95");
  EXPECT_EQ(cpuListToNcclMask("0-31,64-95"), "ffffffff,00000000,ffffffff");
  EXPECT_EQ(cpuListToNcclMask("0-31,64-95", 4), "00000000,ffffffff,00000000,ffffffff");
  EXPECT_EQ(cpuListToNcclMask("0-3"), "0000000f");
  EXPECT_FALSE(ncclMaskToCpuList("xyz").has_value());
  EXPECT_FALSE(cpuListToNcclMask("").has_value());
}

}  // namespace
}  // namespace loom
