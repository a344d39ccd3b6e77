// GPU memory as dmabuf fds (device_layer.h), for a NIC to register (GPUDirect RDMA without
// nvidia-peermem). The driver calls are reached by entry point (driver_entry.h).

#include "device/device_layer.h"
#include "device/driver_entry.h"
#include "device/memory_kind.h"

namespace loom::device {

bool dmabufExportable(int device, std::string* why) {
  if (!cudaUsable()) {
    *why = unusableReason();
    return false;
  }
  using GetAttribute = CUresult (*)(int*, CUdevice_attribute, CUdevice);
  using GetDevice = CUresult (*)(CUdevice*, int);
  static const GetAttribute getAttribute = driverEntryPoint<GetAttribute>("cuDeviceGetAttribute");
  static const GetDevice getDevice = driverEntryPoint<GetDevice>("cuDeviceGet");
  CUdevice handle = 0;
  int supported = 0;
  if (!getAttribute || !getDevice || getDevice(&handle, device) != CUDA_SUCCESS ||
      getAttribute(&supported, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, handle) != CUDA_SUCCESS) {
    // Drivers before 11.7 do not know the attribute.
    *why = fmt::format("the CUDA driver cannot say whether GPU {} exports dmabufs (11.7 or newer can)", device);
    return false;
  }
  if (!supported) {
    *why = fmt::format("GPU {}'s driver does not export dmabufs (it needs NVIDIA's open kernel modules)", device);
    return false;
  }
  why->clear();
  return true;
}

Status exportDmabuf(const void* p, size_t bytes, DmabufRange* out) {
  *out = DmabufRange{};
  const MemoryInfo info = queryMemory(p);
  if (info.kind != MemoryKind::Device)
    return invalidArgument("dmabuf export of {} bytes at {}: not CUDA device memory", bytes, p);
  std::string why;
  if (!dmabufExportable(info.device, &why)) return invalidArgument("dmabuf export of GPU {} memory: {}", info.device, why);
  using RangeHandle = CUresult (*)(void*, CUdeviceptr, size_t, CUmemRangeHandleType, unsigned long long);
  static const RangeHandle rangeHandle = driverEntryPoint<RangeHandle>("cuMemGetHandleForAddressRange");
  if (!rangeHandle) return systemError("dmabuf export: the CUDA driver lacks cuMemGetHandleForAddressRange");
  const char* start = nullptr;
  size_t size = 0;
  LOOM_TRY(allocationOf(p, &start, &size).withContext("dmabuf export"));
  const auto base = reinterpret_cast<CUdeviceptr>(start);
  const auto at = reinterpret_cast<CUdeviceptr>(p);
  if (at + bytes > base + size)
    return invalidArgument("dmabuf export of {} bytes at {}: the range runs past its allocation ({} bytes at {:#x})",
                           bytes, p, size, static_cast<uint64_t>(base));
  int fd = -1;
  if (CUresult r = rangeHandle(&fd, base, size, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0); r != CUDA_SUCCESS)
    return systemError("dmabuf export: cuMemGetHandleForAddressRange of {} bytes at {:#x}: {}", size,
                       static_cast<uint64_t>(base), driverError(r));
  out->fd = fd;
  out->offset = at - base;
  out->base = reinterpret_cast<const void*>(base);
  out->bytes = size;
  return Status::Ok();
}

}  // namespace loom::device
