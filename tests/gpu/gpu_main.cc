// main() of the test binaries that need a GPU: without one, every test skips with the reason and the
// binary exits 77, which meson reports as SKIP (not as a pass). A machine whose NVIDIA driver is
// installed but unusable from here (a driver older than the runtime, say) fails instead.
#include <gtest/gtest.h>

#include <cstdio>

#include "gpu_support.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int result = RUN_ALL_TESTS();
  const loomgpu::GpuProbe& probe = loomgpu::probeGpu();
  if (probe.broken) {  // every test failed already; say why once more, last
    std::printf("FAIL: a GPU driver is installed, but %s\n", probe.reason.c_str());
    return 1;
  }
  if (result == 0 && probe.devices == 0) {
    std::printf("SKIP: no CUDA device (%s)\n", probe.reason.c_str());
    return 77;
  }
  return result;
}
