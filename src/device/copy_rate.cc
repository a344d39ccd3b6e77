#include "device/copy_rate.h"

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>

#include "base/log.h"
#include "base/settings.h"
#include "device/memory_kind.h"

namespace loom::device {
namespace {

// 64 MiB per copy, 4 timed after one untimed: about 0.2 ms on an H100, long enough that the launch and
// event costs are a few percent of it.
constexpr size_t kCopyBytes = size_t{64} << 20;
constexpr int kTimedCopies = 4;

double measure(int device) {
  DeviceScope scope(device);
  if (scope.error() != 0) return 0;
  cudaStream_t stream = nullptr;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) return 0;
  void* src = nullptr;
  void* dst = nullptr;
  cudaEvent_t start = nullptr, end = nullptr;
  float ms = 0;
  bool ok = cudaMallocAsync(&src, kCopyBytes, stream) == cudaSuccess &&
            cudaMallocAsync(&dst, kCopyBytes, stream) == cudaSuccess && cudaEventCreate(&start) == cudaSuccess &&
            cudaEventCreate(&end) == cudaSuccess &&
            cudaMemcpyAsync(dst, src, kCopyBytes, cudaMemcpyDeviceToDevice, stream) == cudaSuccess &&
            cudaEventRecord(start, stream) == cudaSuccess;
  for (int i = 0; ok && i < kTimedCopies; ++i)
    ok = cudaMemcpyAsync(dst, src, kCopyBytes, cudaMemcpyDeviceToDevice, stream) == cudaSuccess;
  ok = ok && cudaEventRecord(end, stream) == cudaSuccess && cudaEventSynchronize(end) == cudaSuccess &&
       cudaEventElapsedTime(&ms, start, end) == cudaSuccess;
  if (src) cudaFreeAsync(src, stream);
  if (dst) cudaFreeAsync(dst, stream);
  cudaStreamSynchronize(stream);
  if (start) cudaEventDestroy(start);
  if (end) cudaEventDestroy(end);
  cudaStreamDestroy(stream);
  cudaGetLastError();  // a failure here is reported as "not measured", not left for the next call to find
  if (!ok || !(ms > 0)) return 0;
  return static_cast<double>(kCopyBytes) * kTimedCopies / (static_cast<double>(ms) * 1e6);
}

}  // namespace

double gpuCopyRateGbs(int device) {
  if (!cudaUsable() || device < 0 || device >= deviceCount()) return 0;
  static std::mutex mutex;
  static std::map<int, double> measured;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = measured.find(device);
  if (it == measured.end()) {
    it = measured.emplace(device, measure(device)).first;
    LOOM_INFO(Init, "GPU {}: device-to-device copy at {:.0f} GB/s{}", device, it->second,
              it->second > 0 ? "" : " (not measured)");
  }
  return it->second;
}

double gpuCopyRateSettingOrMeasured(int device) {
  const int64_t given = settingInt(Setting::GpuCopyGbs);
  return given > 0 ? static_cast<double>(given) : gpuCopyRateGbs(device);
}

}  // namespace loom::device
