// The low-latency threshold's model (src/device/low_latency.h): words win below handshake x lane
// bandwidth, capped by what a low-latency slot holds; LOOM_DEVICE_LL_BYTES overrides it.
#include "device/low_latency.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "kernels/cuda/device_plan_layout.h"

namespace loom::device {
namespace {

TEST(LowLatency, BelowTheCrossoverOfHandshakeAndBandwidth) {
  EXPECT_EQ(modelLowLatencyBytes(1000, 1.0), 1000u);  // 1 us x 1 GB/s
  EXPECT_EQ(modelLowLatencyBytes(2000, 0.5), 1000u);
  EXPECT_EQ(modelLowLatencyBytes(30000, 0), 0u);  // no handshake to save: never
}

TEST(LowLatency, CappedByTheSlot) {
  EXPECT_EQ(modelLowLatencyBytes(30000, 1.5), cuda::kLowLatencyBytes);
  EXPECT_EQ(modelLowLatencyBytes(1e9, 1e9), cuda::kLowLatencyBytes);
}

TEST(LowLatency, TheSettingOverridesTheModel) {
  setenv("LOOM_DEVICE_LL_BYTES", "0", 1);
  EXPECT_EQ(lowLatencyBytesSetting(), 0u);
  setenv("LOOM_DEVICE_LL_BYTES", "512", 1);
  EXPECT_EQ(lowLatencyBytesSetting(), 512u);
  setenv("LOOM_DEVICE_LL_BYTES", "999999999", 1);  // beyond the slot: the model's
  EXPECT_EQ(lowLatencyBytesSetting(), modelLowLatencyBytes(kLaneBytesPerUs, kSimpleHandshakeUs));
  unsetenv("LOOM_DEVICE_LL_BYTES");
  EXPECT_EQ(lowLatencyBytesSetting(), modelLowLatencyBytes(kLaneBytesPerUs, kSimpleHandshakeUs));
}

}  // namespace
}  // namespace loom::device
