/* A rank waiting for a straggler: 2 rank processes; before each 8 B allreduce rank 1 computes for
 * D ms (a busy loop, as a training step's compute), rank 0 enters at once and waits. Reports, for
 * rank 0, the CPU time its waits burn (user + system, progress thread included, per allreduce) and
 * how late it returns after rank 1 entered the allreduce (p50/p99 in microseconds; CLOCK_MONOTONIC
 * is one clock for both processes). Run it with LOOM_SPIN_US unset (the adaptive spin) and with
 * LOOM_SPIN_US=2000 (a fixed 2 ms spin) to compare. A benchmark, not a test: prints one JSON line.
 *   cc -O2 -o straggler_wait perf/straggler_wait.c $(pkg-config --cflags --libs loom) -lm
 *   ./straggler_wait [D_ms=10] [iters=200] */
#include <loom.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t nowNs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static double cpuSeconds(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}

static int byValue(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static int runRank(int rank, loomUniqueId id, double computeMs, int iters, volatile uint64_t* entered) {
  loomComm_t comm;
  if (loomCommInitRank(&comm, 2, id, rank) != loomSuccess) {
    fprintf(stderr, "rank %d: loomCommInitRank: %s\n", rank, loomGetLastError(NULL));
    return 1;
  }
  double in = rank + 1, out = 0;
  double* lateUs = malloc(sizeof(double) * (size_t)iters);
  const int warmup = 10;
  double cpuStart = 0;
  for (int i = -warmup; i < iters; ++i) {
    if (i == 0) cpuStart = cpuSeconds();
    if (rank == 1) {
      const uint64_t until = nowNs() + (uint64_t)(computeMs * 1e6);
      while (nowNs() < until) {
      }
      entered[i & 1] = nowNs();
    }
    if (loomAllReduce(&in, &out, 1, loomFloat64, loomSum, comm, NULL) != loomSuccess || out != 3) {
      fprintf(stderr, "rank %d: loomAllReduce: %s (result %g)\n", rank, loomGetLastError(comm), out);
      return 1;
    }
    if (rank == 0 && i >= 0) lateUs[i] = (double)(int64_t)(nowNs() - entered[i & 1]) / 1e3;
    /* Rank 1 stamps the next entry only after both left this allreduce: the barrier keeps the
     * two stamps of one parity apart. */
    if (loomAllReduce(&in, &out, 1, loomFloat64, loomSum, comm, NULL) != loomSuccess) return 1;
  }
  if (rank == 0) {
    const double cpuMsPerWait = (cpuSeconds() - cpuStart) * 1e3 / iters;
    qsort(lateUs, (size_t)iters, sizeof(double), byValue);
    const char* spin = "?";
    loomParamGetParameter("LOOM_SPIN_US", &spin, NULL); /* "(computed)": the adaptive spin */
    printf("{\"compute_ms\": %g, \"iters\": %d, \"spin_us\": \"%s\", \"cpu_ms_per_wait\": %.3f, "
           "\"late_p50_us\": %.1f, \"late_p99_us\": %.1f}\n",
           computeMs, iters, spin, cpuMsPerWait, lateUs[iters / 2],
           lateUs[(int)ceil(iters * 0.99) - 1]);
  }
  free(lateUs);
  loomCommDestroy(comm);
  return 0;
}

int main(int argc, char** argv) {
  const double computeMs = argc > 1 ? atof(argv[1]) : 10;
  const int iters = argc > 2 ? atoi(argv[2]) : 200;
  if (computeMs < 0 || iters < 1) return 2;
  loomUniqueId id;
  if (loomGetUniqueId(&id) != loomSuccess) return 1;
  volatile uint64_t* entered = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (entered == MAP_FAILED) return 1;
  pid_t child = fork();
  if (child == 0) _exit(runRank(1, id, computeMs, iters, entered));
  int rc = runRank(0, id, computeMs, iters, entered);
  int status = 0;
  waitpid(child, &status, 0);
  return rc != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0;
}
