// Machines described by NCCL topology XML, and NCCL XML written by Loom read back.
#include <gtest/gtest.h>

#include "fixtures.h"

namespace loom {
namespace {

bool coversAll(const std::vector<int>& ring, int n) {
  std::vector<int> sorted = ring;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < n; ++i)
    if (static_cast<int>(sorted.size()) != n || sorted[static_cast<size_t>(i)] != i) return false;
  return true;
}

TEST(NcclFiles, HgxA100EightGpusOnNvSwitchWithNics) {
  LOOM_FIXTURE_OR_SKIP(path, "nccl-hgx-8xA100-nvswitch-4xcx6.xml");
  SystemGraph g;
  ASSERT_TRUE(loadTopologyFile(path, &g).ok());
  ASSERT_EQ(g.gpuCount(), 8);
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b) {
      if (a == b) continue;
      EXPECT_TRUE(isNvLinkClass(g.gpuPath(a, b).type)) << a << "-" << b;
      EXPECT_GE(g.gpuPath(a, b).bwGbs, 200.0) << a << "-" << b;  // 12 links x 20 GB/s
    }
  // The bonded ConnectX-6 ports, by name and order.
  ASSERT_EQ(g.nicCount(), 5);
  EXPECT_EQ(g.node(g.nics()[0]).name, "mlx5_bond_0");
  EXPECT_DOUBLE_EQ(g.node(g.nics()[1]).speedGbs, 25.0);
  // GPU0 shares a switch level with mlx5_bond_1; mlx5_bond_0 hangs off the CPU.
  int nic = g.closestNic(0);
  ASSERT_GE(nic, 0);
  EXPECT_EQ(g.node(g.nics()[static_cast<size_t>(nic)]).name, "mlx5_bond_1");
  EXPECT_EQ(g.gpuNicPath(0, nic).type, PathType::Pxb);
  EXPECT_EQ(g.gpuNicPath(0, 0).type, PathType::Phb);
  EXPECT_EQ(g.gpuNicPath(0, 3).type, PathType::Sys);  // mlx5_bond_3 is on the other socket

  GpuChannels ch;
  ASSERT_TRUE(searchChannels(g, {}, &ch).ok());
  ASSERT_FALSE(ch.rings.empty());
  for (const auto& ring : ch.rings) EXPECT_TRUE(coversAll(ring, 8));
  EXPECT_NEAR(ch.ringBusGbs, 240.0, 1e-6);
}

TEST(NcclFiles, AzureNdv4GpusAndNicsFromPciClassesOnly) {
  LOOM_FIXTURE_OR_SKIP(path, "nccl-azure-ndv4-topo.xml");
  SystemGraph g;
  ASSERT_TRUE(loadTopologyFile(path, &g).ok());
  ASSERT_EQ(g.gpuCount(), 8);  // class 0x0302, no <gpu> element
  ASSERT_EQ(g.nicCount(), 8);  // class 0x0207, no <nic> element
  EXPECT_EQ(g.cpus().size(), 4u);
  EXPECT_EQ(g.node(g.cpus()[0]).cpuList, "0-23");
  // Each GPU shares the (hand-written) switch with two NICs and one other GPU.
  EXPECT_EQ(g.gpuPath(0, 1).type, PathType::Pix);
  int nic = g.closestNic(0);
  ASSERT_GE(nic, 0);
  EXPECT_EQ(g.gpuNicPath(0, nic).type, PathType::Pix);
  EXPECT_EQ(g.cpuOf(g.nics()[static_cast<size_t>(nic)]), g.cpuOf(g.gpus()[0]));
  GpuChannels ch;
  ASSERT_TRUE(searchChannels(g, {}, &ch).ok());
  EXPECT_TRUE(coversAll(ch.rings.front(), 8));
}

TEST(NcclFiles, PcieOnlyMachineGetsPcieClassesAndBandwidths) {
  SystemGraph g;
  ASSERT_TRUE(loadTopologyFile(testing::dataPath("pcie-4gpu-2socket.xml"), &g).ok());
  ASSERT_EQ(g.gpuCount(), 4);
  EXPECT_EQ(g.gpuPath(0, 1).type, PathType::Pix);
  EXPECT_NEAR(g.gpuPath(0, 1).bwGbs, 15.75, 0.01);  // gen3 x16
  EXPECT_EQ(g.gpuPath(2, 3).type, PathType::Pix);
  EXPECT_NEAR(g.gpuPath(2, 3).bwGbs, 31.5, 0.01);   // gen4 x16 GPUs below the gen3 switch's uplink
  EXPECT_EQ(g.gpuPath(0, 2).type, PathType::Sys);
  EXPECT_DOUBLE_EQ(g.gpuPath(0, 2).bwGbs, 10.0);    // Skylake UPI as NCCL rates it
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b) {
      if (a == b) continue;
      EXPECT_GE(g.gpuPath(a, b).type, PathType::Pix);
      EXPECT_LE(g.gpuPath(a, b).bwGbs, 32.0);
    }
  EXPECT_EQ(g.closestNic(0), 0);
  EXPECT_EQ(g.closestNic(3), 1);
  GpuChannels ch;
  ASSERT_TRUE(searchChannels(g, {}, &ch).ok());
  EXPECT_TRUE(coversAll(ch.rings.front(), 4));
  EXPECT_LE(ch.ringChannelGbs, 10.0 + 1e-9);  // a ring must cross the sockets
}

// Loom's NCCL XML read back gives the same machine: GPUs, NICs, and every GPU pair's path.
void expectRoundTrip(const std::string& path) {
  SystemGraph original;
  ASSERT_TRUE(loadTopologyFile(path, &original).ok()) << path;
  std::string xml;
  ASSERT_TRUE(writeNcclXml(original, &xml).ok());
  SystemGraph copy;
  Status s = parseTopologyXml(xml, "round trip of " + path, &copy);
  ASSERT_TRUE(s.ok()) << s.message() << "\n" << xml;
  ASSERT_EQ(copy.gpuCount(), original.gpuCount());
  ASSERT_EQ(copy.nicCount(), original.nicCount());
  ASSERT_EQ(copy.cpus().size(), original.cpus().size());
  for (int a = 0; a < original.gpuCount(); ++a) {
    EXPECT_EQ(copy.node(copy.gpus()[static_cast<size_t>(a)]).busId, original.node(original.gpus()[static_cast<size_t>(a)]).busId);
    for (int b = 0; b < original.gpuCount(); ++b) {
      EXPECT_EQ(copy.gpuPath(a, b).type, original.gpuPath(a, b).type) << path << " GPU" << a << "-GPU" << b;
      EXPECT_NEAR(copy.gpuPath(a, b).bwGbs, original.gpuPath(a, b).bwGbs, 1e-6) << path << " GPU" << a << "-GPU" << b;
    }
    for (int n = 0; n < original.nicCount(); ++n)
      EXPECT_EQ(copy.gpuNicPath(a, n).type, original.gpuNicPath(a, n).type) << path << " GPU" << a << "-NIC" << n;
  }
  for (int n = 0; n < original.nicCount(); ++n)
    EXPECT_EQ(copy.node(copy.nics()[static_cast<size_t>(n)]).name, original.node(original.nics()[static_cast<size_t>(n)]).name);
  std::string again;
  ASSERT_TRUE(writeNcclXml(copy, &again).ok());
  EXPECT_EQ(again, xml) << "writing is not stable for " << path;
}

TEST(NcclXmlRoundTrip, OwnPcieFile) { expectRoundTrip(testing::dataPath("pcie-4gpu-2socket.xml")); }

TEST(NcclXmlRoundTrip, HgxA100) {
  LOOM_FIXTURE_OR_SKIP(path, "nccl-hgx-8xA100-nvswitch-4xcx6.xml");
  expectRoundTrip(path);
}

TEST(NcclXmlRoundTrip, AzureNdv4) {
  LOOM_FIXTURE_OR_SKIP(path, "nccl-azure-ndv4-topo.xml");
  expectRoundTrip(path);
}

TEST(NcclXmlRoundTrip, FromHwlocDgx2) {
  LOOM_FIXTURE_OR_SKIP(path, "hwloc-dgx2-16xV100-nvswitch.xml");
  expectRoundTrip(path);
}

TEST(NcclXmlRoundTrip, FromHwlocPower8) {
  LOOM_FIXTURE_OR_SKIP(path, "hwloc-power8-4xP100-nvlink.xml");
  expectRoundTrip(path);
}

TEST(NcclXmlRoundTrip, FromHwlocPcieSwitch) {
  LOOM_FIXTURE_OR_SKIP(path, "hwloc-2xP100-pcie-switch-cx5.xml");
  expectRoundTrip(path);
}

TEST(NcclXml, WrittenFileHasNcclShape) {
  LOOM_FIXTURE_OR_SKIP(path, "nccl-hgx-8xA100-nvswitch-4xcx6.xml");
  SystemGraph g;
  ASSERT_TRUE(loadTopologyFile(path, &g).ok());
  std::string xml;
  ASSERT_TRUE(writeNcclXml(g, &xml).ok());
  EXPECT_EQ(xml.rfind("<system version=\"1\">", 0), 0u) << xml.substr(0, 80);
  EXPECT_NE(xml.find("affinity=\"00000000,ffffffff,00000000,ffffffff\""), std::string::npos);
  EXPECT_NE(xml.find("<gpu dev=\"0\" sm=\"80\""), std::string::npos);
  EXPECT_NE(xml.find("tclass=\"0x068000\""), std::string::npos);
  EXPECT_NE(xml.find("link_speed=\"16 GT/s\" link_width=\"16\""), std::string::npos);
  EXPECT_NE(xml.find("<net name=\"mlx5_bond_4\" dev=\"4\" speed=\"200000\""), std::string::npos);
}

}  // namespace
}  // namespace loom
