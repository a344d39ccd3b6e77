/* A hand-written floor for a 2-rank host allreduce: what two processes on this machine achieve for a
 * float-sum allreduce of one size with nothing but shared memory and the simplest schedule, written
 * without any of a library's generality (no plans, no dtypes, no error handling). If a library is as
 * fast as this, what is left is the machine.
 *
 * Schedule (pairwise, pipelined): each rank copies chunk k of its input into its own slot ring in
 * shared memory, then sums the peer's chunk k with its own (still in cache) into its output with
 * non-temporal stores. Each rank reads its input once from DRAM and writes its output once: the least
 * memory traffic an out-of-place allreduce can have.
 *
 * usage: shm_allreduce_floor [MiB=64] [chunk KiB=64] [iterations=15]
 * prints JSON: {"bytes":..., "chunk_bytes":..., "median_ms":..., "busbw_gbs":...}
 * Checks the result and exits 1 when it is wrong. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

enum { kSlots = 8, kMaxChunk = 1 << 20, kMaxIters = 101 };

typedef struct {
  _Alignas(64) atomic_ulong published; /* chunks this rank wrote into its ring */
  _Alignas(64) atomic_ulong consumed;  /* chunks the peer has summed out of this rank's ring */
} Ring;

typedef struct {
  Ring ring[2];
  _Alignas(64) atomic_ulong arrived; /* start barrier: both ranks add 1 per iteration */
  _Alignas(64) int wrong;
  double median_ms;
  _Alignas(4096) float slots[2][kSlots][kMaxChunk / sizeof(float)];
} Shared;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Spin briefly, then yield: with as many ranks as cores a pure spin still works, but yielding keeps
 * the benchmark honest on a loaded machine. */
static void waitAtLeast(atomic_ulong* counter, unsigned long value) {
  for (unsigned spins = 0; atomic_load_explicit(counter, memory_order_acquire) < value;)
    if (++spins > 1000) sched_yield();
}

/* out = a + b with streaming stores where out is 16-byte aligned (it is: aligned_alloc). */
static void sumStreaming(float* out, const float* a, const float* b, size_t n) {
  size_t i = 0;
#if defined(__x86_64__)
  for (; i + 4 <= n; i += 4) _mm_stream_ps(out + i, _mm_add_ps(_mm_loadu_ps(a + i), _mm_loadu_ps(b + i)));
  _mm_sfence();
#endif
  for (; i < n; ++i) out[i] = a[i] + b[i];
}

static void allreduce(Shared* s, int rank, const float* in, float* out, size_t n, size_t chunk,
                      unsigned long* done) {
  Ring* mine = &s->ring[rank];
  Ring* peers = &s->ring[1 - rank];
  for (size_t offset = 0; offset < n; offset += chunk) {
    const size_t m = n - offset < chunk ? n - offset : chunk;
    const unsigned long k = (*done)++;
    float* slot = s->slots[rank][k % kSlots];
    if (k >= kSlots) waitAtLeast(&mine->consumed, k - kSlots + 1);
    memcpy(slot, in + offset, m * sizeof(float));
    atomic_store_explicit(&mine->published, k + 1, memory_order_release);
    waitAtLeast(&peers->published, k + 1);
    sumStreaming(out + offset, in + offset, s->slots[1 - rank][k % kSlots], m);
    atomic_store_explicit(&peers->consumed, k + 1, memory_order_release);
  }
}

static int compareDoubles(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static void runRank(Shared* s, int rank, size_t bytes, size_t chunkBytes, int iters) {
  const size_t n = bytes / sizeof(float), chunk = chunkBytes / sizeof(float);
  float* in = aligned_alloc(64, bytes);
  float* out = aligned_alloc(64, bytes);
  if (!in || !out) _exit(2);
  for (size_t i = 0; i < n; ++i) {
    in[i] = (float)(rank + 1) + (float)(i % 7);
    out[i] = 0;
  }
  double times[kMaxIters];
  unsigned long done = 0;
  for (int it = 0; it < iters; ++it) {
    atomic_fetch_add(&s->arrived, 1);
    waitAtLeast(&s->arrived, 2ul * (it + 1));
    const double t0 = now();
    allreduce(s, rank, in, out, n, chunk, &done);
    times[it] = now() - t0;
  }
  for (size_t i = 0; i < n; ++i)
    if (out[i] != 3.0f + 2.0f * (float)(i % 7)) s->wrong = 1;
  qsort(times, iters, sizeof(double), compareDoubles);
  if (rank == 0) s->median_ms = times[iters / 2] * 1e3;
  _exit(0);
}

int main(int argc, char** argv) {
  const size_t bytes = (size_t)(argc > 1 ? atol(argv[1]) : 64) << 20;
  const size_t chunkBytes = (size_t)(argc > 2 ? atol(argv[2]) : 64) << 10;
  int iters = argc > 3 ? atoi(argv[3]) : 15;
  if (bytes == 0 || chunkBytes == 0 || chunkBytes > kMaxChunk || chunkBytes % 64 || iters < 1) {
    fprintf(stderr, "usage: %s [MiB>0] [chunk KiB, multiple of 64 B, <= 1024] [iterations]\n", argv[0]);
    return 2;
  }
  if (iters > kMaxIters) iters = kMaxIters;
  Shared* s = mmap(NULL, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (s == MAP_FAILED) return 2;
  for (int rank = 0; rank < 2; ++rank)
    if (fork() == 0) runRank(s, rank, bytes, chunkBytes, iters);
  int status = 0, failed = 0;
  for (int rank = 0; rank < 2; ++rank) {
    wait(&status);
    failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  }
  if (failed || s->wrong) {
    fprintf(stderr, "shm_allreduce_floor: %s\n", failed ? "a rank failed" : "wrong result");
    return 1;
  }
  printf("{\"bytes\": %zu, \"chunk_bytes\": %zu, \"median_ms\": %.2f, \"busbw_gbs\": %.2f}\n", bytes, chunkBytes,
         s->median_ms, bytes / (s->median_ms * 1e-3) / 1e9);
  return 0;
}
