// main() of the GPU test binaries (the CUDA runtime's and FakeCuda's): a run without a GPU in which
// every selected test skipped for want of one exits 77, which meson reports as SKIP (not as a pass); a
// run whose tests do not all need a GPU (the host-only checks, the emulated kernels) passes or fails as
// usual. A machine whose NVIDIA driver is installed but unusable from here (a driver older than the
// runtime, say) fails.
#include <gtest/gtest.h>

#include <cstdio>

#include "gpu_support.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int result = RUN_ALL_TESTS();
  const ::testing::UnitTest& run = *::testing::UnitTest::GetInstance();
  if (GTEST_FLAG_GET(list_tests)) return result;
  if (run.test_to_run_count() > 0 && run.skipped_test_count() < run.test_to_run_count()) return result;
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
