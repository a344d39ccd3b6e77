#include "device/low_latency.h"

#include <algorithm>

#include "base/settings.h"
#include "base/log.h"
#include "kernels/cuda/device_plan_layout.h"

namespace loom::device {

uint64_t modelLowLatencyBytes(double laneBytesPerUs, double handshakeUs) {
  // h + B / bw (a slot and a counter) against 2B / bw (words): equal at B = h x bw.
  const double crossover = std::max(0.0, laneBytesPerUs * handshakeUs);
  return std::min<uint64_t>(static_cast<uint64_t>(crossover), cuda::kLowLatencyBytes);
}

uint64_t lowLatencyBytesSetting() {
  const uint64_t model = modelLowLatencyBytes(kLaneBytesPerUs, kSimpleHandshakeUs);
  return static_cast<uint64_t>(settingInt(Setting::DeviceLlBytes, static_cast<int64_t>(model)));
}

}  // namespace loom::device
