#include "device/memory_kind.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <mutex>
#include <utility>

#include "base/settings.h"
#include "base/log.h"
#include "device/driver_entry.h"

namespace loom::device {
namespace {

struct CudaAvailability {
  bool usable = false;
  int devices = 0;
  std::string reason;
};

const CudaAvailability& availability() {
  static const CudaAvailability state = [] {
    CudaAvailability s;
    if (!settingFlag(Setting::Cuda)) {
      s.reason = "CUDA is disabled by LOOM_CUDA=0";
      return s;
    }
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      // cudaErrorInsufficientDriver (no libcuda.so), cudaErrorNoDevice, ...: host memory only.
      s.reason = std::string("no usable CUDA driver or device (cudaGetDeviceCount: ") + cudaGetErrorName(err) + ": " +
                 cudaGetErrorString(err) + ")";
      cudaGetLastError();  // leave no sticky error for the caller's own CUDA code
      return s;
    }
    if (n <= 0) {
      s.reason = "no CUDA device is visible";
      return s;
    }
    s.usable = true;
    s.devices = n;
    return s;
  }();
  static std::once_flag logged;
  std::call_once(logged, [] {
    if (state.usable)
      LOOM_INFO(Init, "CUDA: {} device(s); device buffers are detected per call", state.devices);
    else
      LOOM_INFO(Init, "CUDA: host memory only: {}", state.reason);
  });
  return state;
}

}  // namespace

bool cudaUsable() { return availability().usable; }

int deviceCount() { return availability().devices; }

const std::string& unusableReason() { return availability().reason; }

MemoryInfo queryMemory(const void* p) {
  MemoryInfo info;
  if (p == nullptr || !cudaUsable()) return info;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();  // older runtimes flag host pointers as errors; never leave it sticky
    return info;
  }
  switch (attr.type) {
    case cudaMemoryTypeDevice:
      info.kind = MemoryKind::Device;
      info.device = attr.device;
      break;
    case cudaMemoryTypeManaged:
      info.kind = MemoryKind::Managed;
      info.device = attr.device;
      break;
    default:
      break;
  }
  return info;
}

Placement placementOf(const void* send, size_t sendBytes, const void* recv, size_t recvBytes) {
  Placement where;
  if (!cudaUsable()) return where;
  if (sendBytes) where.send = queryMemory(send);
  if (recvBytes) where.recv = recv == send && sendBytes ? where.send : queryMemory(recv);  // in place: one query
  int gpu = -1;
  for (auto [info, bytes] : {std::pair{where.send, sendBytes}, std::pair{where.recv, recvBytes}}) {
    if (bytes == 0) continue;
    if (info.kind != MemoryKind::Device || (gpu >= 0 && info.device != gpu)) return where;
    gpu = info.device;
  }
  where.kernelGpu = gpu;
  return where;
}

Status allocateDeviceMemory(size_t bytes, void** out) {
  *out = nullptr;
  if (!cudaUsable()) return Status(loomInvalidUsage, fmt::format("no device memory here: {}", unusableReason()));
  LOOM_CUDA_TRY(cudaMalloc(out, bytes));
  return Status::Ok();
}

Status freeDeviceMemory(void* p) {
  if (!cudaUsable()) return Status(loomInvalidUsage, fmt::format("no device memory here: {}", unusableReason()));
  LOOM_CUDA_TRY(cudaFree(p));
  return Status::Ok();
}

Status checkDeviceList(int ndev, const int* devlist) {
  if (!cudaUsable())
    return invalidArgument("loomCommInitAll: device lists need a GPU ({}); pass NULL for host ranks", unusableReason());
  const int visible = deviceCount();
  for (int i = 0; i < ndev; ++i)
    if (devlist[i] < 0 || devlist[i] >= visible)
      return invalidArgument("loomCommInitAll: devlist[{}] = {} is not one of the {} visible CUDA device(s)", i,
                             devlist[i], visible);
  return Status::Ok();
}

int activeDevice() {
  if (!cudaUsable()) return -1;
  using GetDevice = CUresult (*)(CUdevice*, int);
  using PrimaryState = CUresult (*)(CUdevice, unsigned int*, int*);
  static const GetDevice getDevice = driverEntryPoint<GetDevice>("cuDeviceGet");
  static const PrimaryState primaryState = driverEntryPoint<PrimaryState>("cuDevicePrimaryCtxGetState");
  int device = -1;
  if (!getDevice || !primaryState || cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  CUdevice handle = 0;
  unsigned int flags = 0;
  int active = 0;
  if (getDevice(&handle, device) != CUDA_SUCCESS || primaryState(handle, &flags, &active) != CUDA_SUCCESS) return -1;
  return active ? device : -1;
}

std::string busIdOf(int device) {
  char bus[32] = {};
  if (device < 0 || !cudaUsable() || cudaDeviceGetPCIBusId(bus, sizeof bus, device) != cudaSuccess) {
    cudaGetLastError();
    return "";
  }
  return bus;
}

bool coveredByPeerAccess(const void* p) {
  if (p == nullptr || !cudaUsable()) return false;
  using GetAttribute = CUresult (*)(void*, CUpointer_attribute, CUdeviceptr);
  static const GetAttribute getAttribute = driverEntryPoint<GetAttribute>("cuPointerGetAttribute");
  if (!getAttribute) return false;
  // "Suitable for cudaIpcGetMemHandle" is exactly the legacy (cudaMalloc / cuMemAlloc) allocations.
  int legacy = 0;
  if (getAttribute(&legacy, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, reinterpret_cast<CUdeviceptr>(p)) !=
      CUDA_SUCCESS)
    return false;
  return legacy != 0;
}

Status allocationOf(const void* p, const char** base, size_t* bytes) {
  using AddressRange = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);
  static const AddressRange addressRange = driverEntryPoint<AddressRange>("cuMemGetAddressRange");
  if (!addressRange) return systemError("the CUDA driver lacks cuMemGetAddressRange");
  CUdeviceptr start = 0;
  if (CUresult r = addressRange(&start, bytes, reinterpret_cast<CUdeviceptr>(p)); r != CUDA_SUCCESS)
    return invalidArgument("cuMemGetAddressRange({}): {}", p, driverError(r));
  *base = reinterpret_cast<const char*>(start);
  return Status::Ok();
}

Status cudaStatus(int cudaError, const char* what) {
  if (cudaError == cudaSuccess) return Status::Ok();
  auto err = static_cast<cudaError_t>(cudaError);
  return Status(loomUnhandledCudaError,
                std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

DeviceScope::DeviceScope(int device) {
  if (device < 0) return;
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current == device) return;
  error_ = static_cast<int>(cudaSetDevice(device));
  if (error_ == 0) previous_ = current;
}

DeviceScope::~DeviceScope() {
  if (previous_ >= 0) cudaSetDevice(previous_);
}

}  // namespace loom::device
