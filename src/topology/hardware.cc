#include "topology/hardware.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace loom {

std::optional<std::string> normalizeBusId(std::string_view text) {
  std::string s(text);
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  int used = 0;
  if (std::count(s.begin(), s.end(), ':') == 2) {
    if (std::sscanf(s.c_str(), "%x:%x:%x.%x%n", &domain, &bus, &dev, &fn, &used) != 4) return std::nullopt;
  } else if (std::sscanf(s.c_str(), "%x:%x.%x%n", &bus, &dev, &fn, &used) != 3) {
    return std::nullopt;
  }
  if (static_cast<size_t>(used) != s.size() || bus > 0xff || dev > 0x1f || fn > 7) return std::nullopt;
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", domain, bus, dev, fn);
}

double pciLinkGbs(double gts, int width) {
  if (!(gts > 0) || width <= 0) return 0;
  // 8b/10b encoding up to gen2, 128b/130b for gen3-5, FLIT mode (about 242/256) from gen6.
  double efficiency = gts < 8 ? 0.8 : gts < 64 ? 128.0 / 130.0 : 242.0 / 256.0;
  return gts * efficiency * width / 8.0;
}

double nvlinkGbsPerLink(int sm) {
  // NCCL's SMxx_NVLINK_BW values (src/graph/topo.h).
  if (sm >= 100) return 40.1;
  if (sm >= 90) return 20.6;
  if (sm == 86 || sm == 87 || sm == 89) return 12.0;
  if (sm >= 80) return 20.0;
  if (sm >= 70) return 20.0;
  if (sm >= 60) return 18.0;
  return 20.0;  // unknown generation
}

int smFromGpuModel(std::string_view model) {
  struct Entry {
    const char* token;
    int sm;
  };
  // Longer tokens first where one contains another (GH200 before H200).
  static const Entry entries[] = {{"GB200", 100}, {"B200", 100}, {"B100", 100}, {"GH200", 90},
                                  {"H200", 90},   {"H100", 90},  {"H800", 90},  {"H20", 90},
                                  {"L40", 89},    {"L4", 89},    {"A100", 80},  {"A800", 80},
                                  {"A30", 80},    {"A40", 86},   {"A10", 86},   {"V100", 70},
                                  {"P100", 60},   {"P40", 61},   {"T4", 75}};
  std::string upper(model);
  std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
  for (const Entry& e : entries)
    if (upper.find(e.token) != std::string::npos) return e.sm;
  return 0;
}

double cpuInterconnectGbs(std::string_view arch, std::string_view vendor, int family, int model) {
  // NCCL's figures (src/graph/topo.h): BDW_QPI_BW 6, SKL_QPI_BW 10, SRP_QPI_BW 22, AMD_BW 16, P9_BW 32.
  if (arch.find("ppc") != std::string_view::npos || arch.find("POWER") != std::string_view::npos) return 32.0;
  if (vendor.find("AMD") != std::string_view::npos) return 16.0;
  if (vendor.find("Intel") != std::string_view::npos) {
    if (family == 6 && model >= 0x8f) return 22.0;  // Sapphire Rapids and later
    if (family == 6 && model >= 0x55) return 10.0;  // Skylake-SP and later
    return 6.0;
  }
  return 6.0;
}

}  // namespace loom
