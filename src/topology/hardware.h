// Hardware facts the importers share: PCI address and class parsing, and the bandwidth tables that turn
// what a file says (PCIe generation and width, NVLink count and GPU generation, CPU model, NIC speed)
// into GB/s. The NVLink and CPU figures are the effective rates NCCL uses, not the datasheet peaks, so
// that predicted bus bandwidths line up with what nccl-tests measures.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace loom {

// "0000:0C:00.0", "00000000:0c:00.0" or "0c:00.0" -> "0000:0c:00.0"; nullopt when not an address.
std::optional<std::string> normalizeBusId(std::string_view text);

// PCI class codes as 16-bit class/subclass values.
constexpr uint32_t kPciClassVga = 0x0300, kPciClass3d = 0x0302;
constexpr uint32_t kPciClassEthernet = 0x0200, kPciClassInfiniband = 0x0207;
constexpr uint32_t kPciClassBridge = 0x0604, kPciClassOtherBridge = 0x0680;
constexpr uint16_t kNvidiaVendor = 0x10de;
inline bool isGpuClass(uint32_t pciClass) { return pciClass == kPciClassVga || pciClass == kPciClass3d; }
inline bool isNetworkClass(uint32_t pciClass) { return (pciClass >> 8) == 0x02; }

// PCIe bandwidth per direction in GB/s after line encoding: 8 GT/s x16 -> 15.75.
double pciLinkGbs(double gigaTransfersPerSecond, int width);
// Used when a source gives no usable PCIe speed: a gen3 x16 link.
constexpr double kDefaultPciGbs = 15.75;

// Effective per-link NVLink bandwidth for a GPU generation (compute capability x10; 0 = unknown).
double nvlinkGbsPerLink(int sm);
// Compute capability guessed from a marketing name ("Tesla V100-SXM3-32GB" -> 70); 0 when unknown.
int smFromGpuModel(std::string_view model);

// CPU-to-CPU interconnect bandwidth per direction for a CPU described by arch/vendor/model.
double cpuInterconnectGbs(std::string_view arch, std::string_view vendor, int family, int model);

}  // namespace loom
