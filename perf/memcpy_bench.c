/* The physical limits for host collectives on this machine. Prints JSON:
 *   dram_gbs       single-thread memcpy of 64 MiB (bytes copied per second)
 *   cache_gbs      single-thread memcpy of 256 KiB (stays in cache)
 *   shared_dram_gbs  memcpy of 64 MiB per process while NP processes copy at once (argument 1,
 *                  default 2): what each rank of an NP-rank collective can move when all move
 *   stream_dram_gbs  the same with non-temporal stores (x86-64; no read of the destination first)
 *   sum_dram_gbs   out = a + b over 64 MiB of floats, output bytes per second, while NP processes do it
 * An allreduce rank must at least read its input and write its output: its busbw at sizes beyond the
 * caches cannot beat stream_dram_gbs (the fastest way to do that), and shared_dram_gbs is what plain
 * stores give. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

enum kernel { COPY, STREAM, SUM };

static void streamCopy(char* dst, const char* src, size_t bytes) {
#if defined(__x86_64__)
  for (size_t i = 0; i + 64 <= bytes; i += 64) /* malloc'd 64 MiB blocks are 16-byte aligned */
    for (int k = 0; k < 4; ++k)
      _mm_stream_si128((__m128i*)(dst + i + 16 * k), _mm_loadu_si128((const __m128i*)(src + i + 16 * k)));
  _mm_sfence();
#else
  memcpy(dst, src, bytes);
#endif
}

/* Best of 5 rounds of `seconds / 5` each, in output bytes per second. */
static double measure(enum kernel kind, size_t bytes, double seconds) {
  char* a = malloc(bytes);
  char* b = malloc(bytes);
  char* c = malloc(bytes);
  memset(a, 1, bytes);
  memset(b, 2, bytes);
  memset(c, 0, bytes);
  const size_t n = bytes / sizeof(float);
  float *x = (float*)a, *y = (float*)b, *z = (float*)c;
  double best = 0;
  for (int round = 0; round < 5; ++round) {
    size_t moved = 0;
    double t0 = now(), t;
    do {
      if (kind == COPY) {
        memcpy(b, a, bytes);
      } else if (kind == STREAM) {
        streamCopy(b, a, bytes);
      } else {
        for (size_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
      }
      moved += bytes;
      a[moved % bytes] ^= 1; /* keeps the compiler from dropping work */
    } while ((t = now()) - t0 < seconds / 5);
    double gbs = moved / (t - t0) / 1e9;
    if (gbs > best) best = gbs;
  }
  free(a);
  free(b);
  free(c);
  return best;
}

/* The slowest of `procs` processes running `kind` at the same time (each reports into shared memory). */
static double measureShared(enum kernel kind, int procs, size_t bytes, double seconds) {
  double* results = mmap(NULL, sizeof(double) * procs, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (results == MAP_FAILED) return 0;
  for (int p = 0; p < procs; ++p) {
    pid_t pid = fork();
    if (pid == 0) {
      results[p] = measure(kind, bytes, seconds);
      _exit(0);
    }
    if (pid < 0) results[p] = 0;
  }
  while (wait(NULL) > 0) {
  }
  double slowest = results[0];
  for (int p = 1; p < procs; ++p)
    if (results[p] < slowest) slowest = results[p];
  munmap(results, sizeof(double) * procs);
  return slowest;
}

int main(int argc, char** argv) {
  int procs = argc > 1 ? atoi(argv[1]) : 2;
  if (procs < 1) procs = 1;
  const size_t dram = 64u << 20;
  printf("{\"dram_gbs\": %.2f, \"cache_gbs\": %.2f, \"procs\": %d, \"shared_dram_gbs\": %.2f, "
         "\"stream_dram_gbs\": %.2f, \"sum_dram_gbs\": %.2f}\n",
         measure(COPY, dram, 1.0), measure(COPY, 256u << 10, 0.5), procs, measureShared(COPY, procs, dram, 1.0),
         measureShared(STREAM, procs, dram, 1.0), measureShared(SUM, procs, dram, 1.0));
  return 0;
}
