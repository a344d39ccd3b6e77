// Real machines described by hwloc XML files.
#include <gtest/gtest.h>

#include <numeric>

#include "fixtures.h"

namespace loom {
namespace {

TEST(HwlocFiles, Dgx2Has16GpusOnNvSwitchesAndARingOverAll) {
  LOOM_FIXTURE_OR_SKIP(path, "hwloc-dgx2-16xV100-nvswitch.xml");
  SystemGraph g;
  ASSERT_TRUE(loadTopologyFile(path, &g).ok());
  ASSERT_EQ(g.gpuCount(), 16);
  EXPECT_EQ(g.cpus().size(), 2u);
  const Path& p01 = g.gpuPath(0, 1);
  EXPECT_TRUE(isNvLinkClass(p01.type)) << pathTypeName(p01.type);
  EXPECT_GE(p01.bwGbs, 100.0);
  EXPECT_NEAR(p01.bwGbs, 150.0, 1e-6);  // 6 NVLinks x 25 GB/s, one to each switch of its baseboard
  // Across baseboards too: the switches' trunks keep the fabric non-blocking.
  EXPECT_EQ(g.gpuPath(0, 15).type, PathType::Nvl);
  // GPUs are numbered by their nvml index.
  EXPECT_EQ(g.node(g.gpus()[0]).busId, "0000:34:00.0");
  EXPECT_EQ(g.node(g.gpus()[0]).sm, 70);

  GpuChannels ch;
  ASSERT_TRUE(searchChannels(g, {}, &ch).ok());
  ASSERT_FALSE(ch.rings.empty());
  for (const auto& ring : ch.rings) {
    std::vector<int> sorted = ring;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int> all(16);
    std::iota(all.begin(), all.end(), 0);
    EXPECT_EQ(sorted, all);
  }
  EXPECT_NEAR(ch.ringBusGbs, 150.0, 1e-6);
  EXPECT_GE(ringBottleneckGbs(g, ch.rings[0]), ch.ringChannelGbs);
  ASSERT_EQ(ch.trees.size(), 2u);
  EXPECT_EQ(ch.trees[0].size(), 16u);
}

TEST(HwlocFiles, Power8DirectNvlinkAndSysAcrossSockets) {
  LOOM_FIXTURE_OR_SKIP(path, "hwloc-power8-4xP100-nvlink.xml");
  SystemGraph g;
  ASSERT_TRUE(loadTopologyFile(path, &g).ok());
  ASSERT_EQ(g.gpuCount(), 4);  // cuda0..3 and nvml0..3 describe the same four devices
  EXPECT_EQ(g.gpuPath(0, 1).type, PathType::Nvl);
  EXPECT_NEAR(g.gpuPath(0, 1).bwGbs, 40.0, 1e-6);
  EXPECT_EQ(g.gpuPath(2, 3).type, PathType::Nvl);
  EXPECT_EQ(g.gpuPath(0, 2).type, PathType::Sys);
  EXPECT_DOUBLE_EQ(g.gpuPath(0, 2).bwGbs, 32.0);  // NVLink to the CPUs, then POWER's X-Bus
  GpuChannels ch;
  ASSERT_TRUE(searchChannels(g, {}, &ch).ok());
  EXPECT_EQ(ch.rings.front().size(), 4u);
}

TEST(HwlocFiles, PcieSwitchWithTwoGpusAndNicIsPcieOnly) {
  LOOM_FIXTURE_OR_SKIP(path, "hwloc-2xP100-pcie-switch-cx5.xml");
  SystemGraph g;
  ASSERT_TRUE(loadTopologyFile(path, &g).ok());
  ASSERT_EQ(g.gpuCount(), 2);
  const Path& p = g.gpuPath(0, 1);
  EXPECT_EQ(p.type, PathType::Pix);  // upstream and downstream ports of one switch are one switch
  EXPECT_GT(p.bwGbs, 0.0);
  EXPECT_LE(p.bwGbs, 32.0);
  int nic = g.closestNic(0);
  ASSERT_GE(nic, 0);
  EXPECT_EQ(g.node(g.nics()[static_cast<size_t>(nic)]).name, "mlx5_0");
  EXPECT_EQ(g.gpuNicPath(0, nic).type, PathType::Pix);
  for (int a = 0; a < g.gpuCount(); ++a)
    for (int b = 0; b < g.gpuCount(); ++b)
      if (a != b) {
        EXPECT_FALSE(isNvLinkClass(g.gpuPath(a, b).type));
      }
}

TEST(HwlocFiles, TwoSocketGpuAndHcaOnOneRootPort) {
  LOOM_FIXTURE_OR_SKIP(path, "hwloc-2socket-pci-gpu-ib.xml");
  SystemGraph g;
  ASSERT_TRUE(loadTopologyFile(path, &g).ok());
  // Only one of the three Tesla boards has a CUDA device; the Radeon is OpenCL only.
  ASSERT_EQ(g.gpuCount(), 1);
  EXPECT_EQ(g.node(g.gpus()[0]).busId, "0000:84:00.0");
  EXPECT_EQ(g.cpus().size(), 2u);
  int hca = -1;
  for (int i = 0; i < g.nicCount(); ++i)
    if (g.node(g.nics()[static_cast<size_t>(i)]).name == "mlx5_0") hca = i;
  ASSERT_GE(hca, 0);
  // The file puts the HCA on the GPU's root port of socket 1: the root complex joins them (PHB), as in
  // NCCL, which also stops at root ports.
  EXPECT_EQ(g.gpuNicPath(0, hca).type, PathType::Phb);
  EXPECT_EQ(g.node(g.cpuOf(g.gpus()[0])).numaId, 1);
  EXPECT_EQ(g.cpuOf(g.nics()[static_cast<size_t>(hca)]), g.cpuOf(g.gpus()[0]));
  EXPECT_EQ(g.path(g.cpus()[0], g.gpus()[0]).type, PathType::Sys);
}

TEST(HwlocFiles, Hwloc3FormatIsRefusedClearly) {
  LOOM_FIXTURE_OR_SKIP(path, "hwloc3-format-dgx2-unsupported.xml");
  SystemGraph g;
  Status s = loadTopologyFile(path, &g);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), loomInvalidArgument);
  EXPECT_NE(s.message().find("hwloc XML version 3.0 is not supported"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
}

}  // namespace
}  // namespace loom
