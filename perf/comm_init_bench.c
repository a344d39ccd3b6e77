/* Communicator init time: loomCommInitAll for N rank threads, then loomCommDestroy, R times; prints
 * the median and the slowest init in milliseconds as one JSON line. A benchmark, not a test.
 *   cc -O2 -o comm_init_bench perf/comm_init_bench.c $(pkg-config --cflags --libs loom) -lpthread
 *   ./comm_init_bench N [R] */
#include <loom.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double nowMs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int byValue(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 8, reps = argc > 2 ? atoi(argv[2]) : 10;
  if (n < 1 || reps < 1) return 2;
  loomComm_t* comms = malloc(sizeof(loomComm_t) * (size_t)n);
  double* ms = malloc(sizeof(double) * (size_t)reps);
  for (int r = 0; r < reps; ++r) {
    double start = nowMs();
    if (loomCommInitAll(comms, n, NULL) != loomSuccess) {
      fprintf(stderr, "loomCommInitAll: %s\n", loomGetLastError(NULL));
      return 1;
    }
    ms[r] = nowMs() - start;
    for (int i = 0; i < n; ++i) loomCommDestroy(comms[i]);
  }
  qsort(ms, (size_t)reps, sizeof(double), byValue);
  printf("{\"ranks\": %d, \"reps\": %d, \"median_ms\": %.2f, \"max_ms\": %.2f}\n", n, reps, ms[reps / 2], ms[reps - 1]);
  free(ms);
  free(comms);
  return 0;
}
