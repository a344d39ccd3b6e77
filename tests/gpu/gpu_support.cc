#include "gpu_support.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace loomgpu {
namespace {

uint8_t guardByte(size_t i) { return static_cast<uint8_t>(0xA5 ^ (i * 37)); }

void fillJunk(std::vector<uint8_t>& v, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& b : v) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    b = static_cast<uint8_t>(x);
  }
}

// An NVIDIA driver on this machine: its control device node, its /proc entry, or its user-space library.
bool nvidiaDriverInstalled() {
  if (access("/dev/nvidiactl", F_OK) == 0 || access("/proc/driver/nvidia/version", F_OK) == 0) return true;
  if (void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL)) {
    dlclose(lib);
    return true;
  }
  return false;
}

GpuProbe probeInChild() {
  GpuProbe probe;
  int fds[2];
  if (pipe(fds) != 0) {
    probe.reason = "pipe failed";
    return probe;
  }
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    std::string msg = err == cudaSuccess ? std::to_string(n) + " " + (n ? "" : "cudaGetDeviceCount found no device")
                                         : std::string("0 cudaGetDeviceCount: ") + cudaGetErrorName(err) + " (" +
                                               cudaGetErrorString(err) + ")";
    ssize_t unused = write(fds[1], msg.data(), msg.size());
    (void)unused;
    _exit(0);
  }
  close(fds[1]);
  std::string text;
  char buf[512];
  ssize_t got;
  while ((got = read(fds[0], buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(got));
  close(fds[0]);
  int status = 0;
  if (pid > 0) waitpid(pid, &status, 0);
  const size_t space = text.find(' ');
  probe.devices = space == std::string::npos ? 0 : std::atoi(text.substr(0, space).c_str());
  probe.reason = probe.devices ? "" : (space == std::string::npos ? "probe process failed" : text.substr(space + 1));
  // cudaErrorNoDevice is a machine without a GPU; any other failure where a driver is installed is not.
  probe.broken = probe.devices == 0 && nvidiaDriverInstalled() && probe.reason.find("cudaErrorNoDevice") == std::string::npos;
  return probe;
}

}  // namespace

const GpuProbe& probeGpu() {
  static const GpuProbe probe = probeInChild();
  return probe;
}

// Probe before main, before anything in this process can initialize CUDA (a child forked after that
// could not use CUDA and would report no device).
static const bool kProbedAtStart = (probeGpu(), true);

void cudaCheck(int error, const char* what) {
  if (error == 0) return;
  auto e = static_cast<cudaError_t>(error);
  throw std::runtime_error(std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

DeviceBuffer::DeviceBuffer(size_t bytes, uint64_t junkSeed) : capacity_(bytes) {
  void* p = nullptr;
  cudaCheck(cudaMalloc(&p, bytes + 2 * kGuardBytes), "cudaMalloc");
  base_ = static_cast<uint8_t*>(p);
  prepare(bytes, junkSeed);
}

void DeviceBuffer::prepare(size_t bytes, uint64_t junkSeed) {
  if (bytes > capacity_) throw std::runtime_error("DeviceBuffer::prepare beyond the buffer's capacity");
  bytes_ = bytes;
  std::vector<uint8_t> image(bytes + 2 * kGuardBytes);
  std::vector<uint8_t> junk(bytes);
  fillJunk(junk, junkSeed);
  for (size_t i = 0; i < kGuardBytes; ++i) image[i] = image[kGuardBytes + bytes + i] = guardByte(i);
  if (bytes) std::memcpy(image.data() + kGuardBytes, junk.data(), bytes);
  cudaCheck(cudaMemcpy(base_, image.data(), image.size(), cudaMemcpyHostToDevice), "cudaMemcpy (fill)");
  // A pageable-to-device cudaMemcpy may return before its DMA lands; the collective then runs on a
  // non-blocking stream that does not wait for the legacy stream.
  cudaCheck(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize (fill)");
}

DeviceBuffer::~DeviceBuffer() {
  if (base_) cudaFree(base_);
}

void DeviceBuffer::upload(const void* host, size_t bytes, size_t offset) {
  if (bytes == 0) return;
  if (offset + bytes > bytes_) throw std::runtime_error("DeviceBuffer::upload out of range");
  cudaCheck(cudaMemcpy(data() + offset, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (upload)");
  cudaCheck(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize (upload)");
}

std::vector<uint8_t> DeviceBuffer::download() const {
  std::vector<uint8_t> v(bytes_);
  if (bytes_) cudaCheck(cudaMemcpy(v.data(), data(), bytes_, cudaMemcpyDeviceToHost), "cudaMemcpy (download)");
  return v;
}

std::string DeviceBuffer::checkGuards(const std::string& name) const {
  std::vector<uint8_t> front(kGuardBytes), back(kGuardBytes);
  cudaCheck(cudaMemcpy(front.data(), base_, kGuardBytes, cudaMemcpyDeviceToHost), "cudaMemcpy (guard)");
  cudaCheck(cudaMemcpy(back.data(), data() + bytes_, kGuardBytes, cudaMemcpyDeviceToHost), "cudaMemcpy (guard)");
  for (size_t i = 0; i < kGuardBytes; ++i) {
    if (front[i] != guardByte(i)) return name + ": front guard changed at offset " + std::to_string(i);
    if (back[i] != guardByte(i)) return name + ": back guard changed at offset " + std::to_string(i);
  }
  return "";
}

GpuMode gpuMode() {
  static const GpuMode mode = [] {
    const char* v = std::getenv("LOOM_TEST_GPU_MODE");
    const std::string m = v ? v : "threads";
    if (m == "processes") return GpuMode::Processes;
    if (m == "plans") return GpuMode::Plans;
    if (m == "hosts") return GpuMode::Hosts;
    if (m == "process-plans") return GpuMode::ProcessPlans;
    if (m != "threads")
      throw std::runtime_error("LOOM_TEST_GPU_MODE=" + m + " is not threads, processes, plans, hosts or process-plans");
    return GpuMode::Threads;
  }();
  return mode;
}

}  // namespace loomgpu
