// loom-gpu-copy-bw: the copy bandwidths that bound Loom on one GPU, for scripts/gpu-run.sh.
//   device-to-device cudaMemcpyAsync (the limit for a device allreduce on one GPU), and pinned
//   host<->device copies (the limit of the staging path that device buffers take today).
// Usage: loom-gpu-copy-bw [max_bytes (default 1G)] [iterations (default 20)]
// Prints "kind bytes time_us GB/s" rows (GB = 1e9 B; a D2D copy of B bytes counts B, not 2B).
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "loom-gpu-copy-bw: %s: %s (%s)\n", what, cudaGetErrorName(e), cudaGetErrorString(e));
  std::exit(2);
}

double timeCopies(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, int iters, cudaStream_t s) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  check(cudaMemcpyAsync(dst, src, bytes, kind, s), "cudaMemcpyAsync (warmup)");
  check(cudaEventRecord(start, s), "cudaEventRecord");
  for (int i = 0; i < iters; ++i) check(cudaMemcpyAsync(dst, src, bytes, kind, s), "cudaMemcpyAsync");
  check(cudaEventRecord(stop, s), "cudaEventRecord");
  check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms * 1e3 / iters;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t maxBytes = argc > 1 ? std::strtoull(argv[1], nullptr, 0) : (size_t{1} << 30);
  const int iters = argc > 2 ? std::atoi(argv[2]) : 20;
  int n = 0;
  check(cudaGetDeviceCount(&n), "cudaGetDeviceCount");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("# device 0: %s, %d SMs, cc %d.%d\n", prop.name, prop.multiProcessorCount, prop.major, prop.minor);
  void *a = nullptr, *b = nullptr, *h = nullptr;
  check(cudaMalloc(&a, maxBytes), "cudaMalloc");
  check(cudaMalloc(&b, maxBytes), "cudaMalloc");
  check(cudaMallocHost(&h, maxBytes), "cudaMallocHost");
  check(cudaMemset(a, 1, maxBytes), "cudaMemset");
  cudaStream_t s;
  check(cudaStreamCreate(&s), "cudaStreamCreate");
  std::printf("%-6s %12s %12s %10s\n", "# kind", "bytes", "time_us", "GB/s");
  for (size_t bytes = 8; bytes <= maxBytes; bytes *= 2) {
    const int it = bytes >= (size_t{256} << 20) ? std::max(iters / 4, 2) : iters;
    struct {
      const char* name;
      void* dst;
      const void* src;
      cudaMemcpyKind kind;
    } kinds[] = {{"d2d", b, a, cudaMemcpyDeviceToDevice}, {"h2d", a, h, cudaMemcpyHostToDevice},
                 {"d2h", h, a, cudaMemcpyDeviceToHost}};
    for (const auto& k : kinds) {
      const double us = timeCopies(k.dst, k.src, bytes, k.kind, it, s);
      std::printf("%-6s %12zu %12.2f %10.2f\n", k.name, bytes, us, bytes / us / 1e3);
    }
  }
  cudaStreamDestroy(s);
  cudaFree(a);
  cudaFree(b);
  cudaFreeHost(h);
  return 0;
}
