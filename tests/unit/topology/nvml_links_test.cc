// NVLink discovery through NVML, against the stand-in library fake_nvml.c. Loading it first under its
// soname makes addNvmlLinks' dlopen("libnvidia-ml.so.1") find it instead of the driver's.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include "fixtures.h"
#include "topology/nvml_links.h"

namespace loom {
namespace {

TEST(NvmlLinks, ReadsLinksToGpusSwitchesAndCpus) {
  const char* fake = std::getenv("LOOM_TEST_FAKE_NVML");
  if (!fake) GTEST_SKIP() << "LOOM_TEST_FAKE_NVML is not set (run through meson test)";
  void* lib = dlopen(fake, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();

  SystemGraph g;
  Node cpu;
  cpu.kind = NodeKind::Cpu;
  cpu.numaId = 0;
  int c = g.addNode(cpu);
  for (int i = 0; i < 4; ++i) {
    Node gpu;
    gpu.kind = NodeKind::Gpu;
    gpu.busId = fmt::format("0000:1{}:00.0", i);
    gpu.cpu = c;
    g.addLink(c, g.addNode(gpu), LinkKind::Pci, 31.5);
  }
  Status s = addNvmlLinks(&g);
  dlclose(lib);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_TRUE(g.finalize().ok());

  EXPECT_EQ(g.node(g.gpus()[0]).sm, 80);
  EXPECT_EQ(g.gpuPath(0, 1).type, PathType::Nvl);
  EXPECT_DOUBLE_EQ(g.gpuPath(0, 1).bwGbs, 40.0);  // 2 links x 20 GB/s, counted once for both ends
  EXPECT_EQ(g.gpuPath(2, 3).type, PathType::Nvl);  // through the NVSwitch
  EXPECT_DOUBLE_EQ(g.gpuPath(2, 3).bwGbs, 40.0);
  EXPECT_EQ(g.gpuPath(0, 2).type, PathType::Phb);
  int nvlinksToCpu = 0;
  for (const Link& link : g.links())
    if (link.kind == LinkKind::NvLink && (link.a == c || link.b == c)) nvlinksToCpu += link.count;
  EXPECT_EQ(nvlinksToCpu, 1);
}

}  // namespace
}  // namespace loom
