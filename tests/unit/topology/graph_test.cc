// Path classes and channel search on graphs built in the test.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "fixtures.h"
#include "topology/hardware.h"

namespace loom {
namespace {

int addCpu(SystemGraph* g, int numa) {
  Node n;
  n.kind = NodeKind::Cpu;
  n.numaId = numa;
  n.name = "NUMA" + std::to_string(numa);
  return g->addNode(n);
}

int addDevice(SystemGraph* g, NodeKind kind, int parent, int cpu, const std::string& bus, double gbs = 15.75) {
  Node n;
  n.kind = kind;
  n.busId = bus;
  n.cpu = cpu;
  n.cudaDev = -1;
  int id = g->addNode(n);
  g->addLink(parent, id, LinkKind::Pci, gbs);
  return id;
}

bool isPermutation(const std::vector<int>& ring, int n) {
  std::vector<int> sorted = ring;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < n; ++i)
    if (static_cast<int>(sorted.size()) != n || sorted[static_cast<size_t>(i)] != i) return false;
  return true;
}

TEST(Paths, PciClasses) {
  // cpu0 - sw0 - {sw1 - {g0, g1}, g2};  cpu1 - g3
  SystemGraph g;
  int c0 = addCpu(&g, 0), c1 = addCpu(&g, 1);
  g.addLink(c0, c1, LinkKind::Sys, 10);
  int sw0 = addDevice(&g, NodeKind::PciSwitch, c0, c0, "0000:10:00.0");
  int sw1 = addDevice(&g, NodeKind::PciSwitch, sw0, c0, "0000:11:00.0");
  addDevice(&g, NodeKind::Gpu, sw1, c0, "0000:12:00.0");
  addDevice(&g, NodeKind::Gpu, sw1, c0, "0000:13:00.0");
  addDevice(&g, NodeKind::Gpu, sw0, c0, "0000:14:00.0");
  addDevice(&g, NodeKind::Gpu, c1, c1, "0000:80:00.0", 31.5);
  addDevice(&g, NodeKind::Nic, c0, c0, "0000:20:00.0");
  ASSERT_TRUE(g.finalize().ok());
  EXPECT_EQ(g.gpuPath(0, 0).type, PathType::Loc);
  EXPECT_EQ(g.gpuPath(0, 1).type, PathType::Pix);
  EXPECT_EQ(g.gpuPath(0, 2).type, PathType::Pxb);
  EXPECT_EQ(g.gpuPath(0, 3).type, PathType::Sys);
  EXPECT_DOUBLE_EQ(g.gpuPath(0, 3).bwGbs, 10.0);
  EXPECT_EQ(g.gpuNicPath(0, 0).type, PathType::Phb);
  EXPECT_EQ(g.gpuPath(0, 1).hops.size(), 2u);
  EXPECT_EQ(g.closestNic(3), 0);
}

TEST(Paths, NvlinkThroughAGpuIsNvb) {
  // g0 = g1 = g2 in a line of NVLinks, all on one PCIe switch.
  SystemGraph g;
  int c0 = addCpu(&g, 0);
  int sw = addDevice(&g, NodeKind::PciSwitch, c0, c0, "0000:10:00.0");
  int a = addDevice(&g, NodeKind::Gpu, sw, c0, "0000:11:00.0");
  int b = addDevice(&g, NodeKind::Gpu, sw, c0, "0000:12:00.0");
  int c = addDevice(&g, NodeKind::Gpu, sw, c0, "0000:13:00.0");
  g.addLink(a, b, LinkKind::NvLink, 50, 2);
  g.addLink(b, c, LinkKind::NvLink, 50, 2);
  ASSERT_TRUE(g.finalize().ok());
  EXPECT_EQ(g.gpuPath(0, 1).type, PathType::Nvl);
  EXPECT_EQ(g.gpuPath(0, 2).type, PathType::Nvb);
  EXPECT_DOUBLE_EQ(g.gpuPath(0, 2).bwGbs, 50.0);
  // NICs never relay: a NIC between two switches does not join them.
  EXPECT_EQ(g.closestNic(0), -1);
}

TEST(Search, FullNvlinkMeshUsesEveryLinkDirection) {
  // Four GPUs, one NVLink between every pair. 12 link directions could carry 3 rings at full rate, but
  // the complete digraph on 4 vertices has no decomposition into 3 Hamiltonian cycles (Tillson), so
  // the search must find 6 rings at half rate instead of settling for 2 at full rate.
  SystemGraph g;
  int c0 = addCpu(&g, 0);
  std::vector<int> gpu;
  for (int i = 0; i < 4; ++i) gpu.push_back(addDevice(&g, NodeKind::Gpu, c0, c0, fmt::format("0000:1{}:00.0", i)));
  for (int i = 0; i < 4; ++i)
    for (int j = i + 1; j < 4; ++j) g.addLink(gpu[i], gpu[j], LinkKind::NvLink, 25, 1);
  ASSERT_TRUE(g.finalize().ok());
  GpuChannels ch;
  ASSERT_TRUE(searchChannels(g, {}, &ch).ok());
  EXPECT_DOUBLE_EQ(ch.ringBusGbs, 75.0);
  std::map<std::pair<int, int>, double> load;  // directed GPU hop -> GB/s
  for (const auto& ring : ch.rings) {
    ASSERT_TRUE(isPermutation(ring, 4));
    for (size_t i = 0; i < ring.size(); ++i) load[{ring[i], ring[(i + 1) % ring.size()]}] += ch.ringChannelGbs;
  }
  EXPECT_EQ(load.size(), 12u);  // every direction of every link carries traffic
  for (const auto& [hop, gbs] : load) EXPECT_LE(gbs, 25.0 + 1e-9) << hop.first << "->" << hop.second;
}

TEST(Search, SharedUplinkLimitsRings) {
  // Two GPUs per socket; every ring crosses the 10 GB/s socket link once each way.
  SystemGraph g;
  ASSERT_TRUE(loadTopologyFile(testing::dataPath("pcie-4gpu-2socket.xml"), &g).ok());
  GpuChannels ch;
  ASSERT_TRUE(searchChannels(g, {}, &ch).ok());
  EXPECT_DOUBLE_EQ(ch.ringBusGbs, 10.0);
  ASSERT_EQ(ch.trees.size(), 2u);
  // Heap layout: with 4 GPUs positions 0 and 1 are inner nodes; no GPU is inner in both trees.
  std::set<int> inner0 = {ch.trees[0][0], ch.trees[0][1]}, inner1 = {ch.trees[1][0], ch.trees[1][1]};
  for (int v : inner0) EXPECT_EQ(inner1.count(v), 0u);
  EXPECT_GT(ch.treeGbs, 0.0);
}

TEST(Search, TinyCases) {
  SystemGraph none;
  addCpu(&none, 0);
  ASSERT_TRUE(none.finalize().ok());
  GpuChannels ch;
  ASSERT_TRUE(searchChannels(none, {}, &ch).ok());
  EXPECT_TRUE(ch.rings.empty());
  EXPECT_TRUE(ch.trees.empty());

  SystemGraph one;
  int c = addCpu(&one, 0);
  addDevice(&one, NodeKind::Gpu, c, c, "0000:10:00.0");
  ASSERT_TRUE(one.finalize().ok());
  ASSERT_TRUE(searchChannels(one, {}, &ch).ok());
  EXPECT_EQ(ch.rings, (std::vector<std::vector<int>>{{0}}));

  ChannelSearchOptions bad;
  bad.maxChannels = 0;
  EXPECT_FALSE(searchChannels(one, bad, &ch).ok());
}

TEST(Search, ChannelCapRespected) {
  LOOM_FIXTURE_OR_SKIP(path, "hwloc-dgx2-16xV100-nvswitch.xml");
  SystemGraph g;
  ASSERT_TRUE(loadTopologyFile(path, &g).ok());
  ChannelSearchOptions options;
  options.maxChannels = 2;
  GpuChannels ch;
  ASSERT_TRUE(searchChannels(g, options, &ch).ok());
  EXPECT_LE(ch.rings.size(), 2u);
  EXPECT_NEAR(ch.ringBusGbs, 150.0, 1e-6);
}

TEST(Graph, FinalizeChecksLinks) {
  SystemGraph g;
  int c = addCpu(&g, 0);
  g.addLink(c, c, LinkKind::Pci, 1);
  EXPECT_FALSE(g.finalize().ok());
}

}  // namespace
}  // namespace loom
