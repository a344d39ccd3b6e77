/* Communicator init time: loomCommInitAll for N rank threads, then loomCommDestroy, R times; prints
 * the median and the slowest init in milliseconds as one JSON line, with what the last init left open
 * (the process's file descriptors: sockets of network connections, with LOOM_TRANSPORT=net) and how
 * long its first two all_reduces of 8 bytes took (a group of all N ranks from this thread: the first
 * makes the connections that are made on first use). A benchmark, not a test.
 *   cc -O2 -o comm_init_bench perf/comm_init_bench.c $(pkg-config --cflags --libs loom) -lpthread
 *   ./comm_init_bench N [R] */
#include <dirent.h>
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

static int openFds(void) {
  DIR* dir = opendir("/proc/self/fd");
  int n = 0;
  if (!dir) return -1;
  while (readdir(dir)) ++n;
  closedir(dir);
  return n - 3; /* ".", ".." and the directory's own */
}

/* One all_reduce of a float on every rank, grouped from this thread; its time in milliseconds. */
static double allReduceMs(loomComm_t* comms, int n, float* values) {
  double start = nowMs();
  loomGroupStart();
  for (int i = 0; i < n; ++i) loomAllReduce(&values[i], &values[i], 1, loomFloat32, loomSum, comms[i], NULL);
  if (loomGroupEnd() != loomSuccess) {
    fprintf(stderr, "all_reduce: %s\n", loomGetLastError(NULL));
    exit(1);
  }
  return nowMs() - start;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 8, reps = argc > 2 ? atoi(argv[2]) : 10;
  if (n < 1 || reps < 1) return 2;
  loomComm_t* comms = malloc(sizeof(loomComm_t) * (size_t)n);
  double* ms = malloc(sizeof(double) * (size_t)reps);
  double firstMs = 0, secondMs = 0;
  int fds = 0, fdsAfter = 0;
  for (int r = 0; r < reps; ++r) {
    double start = nowMs();
    if (loomCommInitAll(comms, n, NULL) != loomSuccess) {
      fprintf(stderr, "loomCommInitAll: %s\n", loomGetLastError(NULL));
      return 1;
    }
    ms[r] = nowMs() - start;
    if (r == reps - 1) {
      fds = openFds();
      float* values = malloc(sizeof(float) * (size_t)n);
      for (int i = 0; i < n; ++i) values[i] = 1.0f;
      firstMs = allReduceMs(comms, n, values);
      secondMs = allReduceMs(comms, n, values);
      if (values[0] != (float)n * (float)n) {
        fprintf(stderr, "all_reduce: %g where %d was expected\n", values[0], n * n);
        return 1;
      }
      fdsAfter = openFds();
      free(values);
    }
    for (int i = 0; i < n; ++i) loomCommDestroy(comms[i]);
  }
  qsort(ms, (size_t)reps, sizeof(double), byValue);
  printf("{\"ranks\": %d, \"reps\": %d, \"median_ms\": %.2f, \"max_ms\": %.2f, \"open_fds\": %d, "
         "\"first_allreduce_ms\": %.2f, \"second_allreduce_ms\": %.2f, \"open_fds_after\": %d}\n",
         n, reps, ms[reps / 2], ms[reps - 1], fds, firstMs, secondMs, fdsAfter);
  free(ms);
  free(comms);
  return 0;
}
