/* The MPI side of perf/compare: times the same collectives as loom-perf (float, sum) with MPI and
 * prints one JSON object per size, with loom-perf's size and bus-bandwidth conventions.
 * usage: mpiexec -n N mpi_bench COLLECTIVE MIN_BYTES MAX_BYTES FACTOR ITERS WARMUP [PERCENTILES]
 * PERCENTILES 1: also p50/p99/max of per-iteration times, each the slowest rank's, as loom-perf
 * --percentiles reports them. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

static int byValue(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* Nearest-rank percentile of n sorted values. */
static double percentile(const double* sorted, int n, double q) {
  int rank = (int)ceil(q * n);
  return sorted[rank > 0 ? (rank > n ? n - 1 : rank - 1) : 0];
}

static double busFactor(const char* coll, int n) {
  if (!strcmp(coll, "all_reduce")) return 2.0 * (n - 1) / n;
  if (!strcmp(coll, "broadcast") || !strcmp(coll, "reduce")) return 1.0;
  return (double)(n - 1) / n;
}

/* Runs one call of `coll` with `count` floats per rank-block. */
static void run(const char* coll, float* send, float* recv, size_t count, int n) {
  int c = (int)count;
  if (!strcmp(coll, "all_reduce")) MPI_Allreduce(send, recv, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  else if (!strcmp(coll, "all_gather")) MPI_Allgather(send, c, MPI_FLOAT, recv, c, MPI_FLOAT, MPI_COMM_WORLD);
  else if (!strcmp(coll, "reduce_scatter")) MPI_Reduce_scatter_block(send, recv, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  else if (!strcmp(coll, "broadcast")) MPI_Bcast(send, c, MPI_FLOAT, 0, MPI_COMM_WORLD);
  else if (!strcmp(coll, "reduce")) MPI_Reduce(send, recv, c, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
  else if (!strcmp(coll, "alltoall")) MPI_Alltoall(send, c, MPI_FLOAT, recv, c, MPI_FLOAT, MPI_COMM_WORLD);
  else if (!strcmp(coll, "gather")) MPI_Gather(send, c, MPI_FLOAT, recv, c, MPI_FLOAT, 0, MPI_COMM_WORLD);
  else if (!strcmp(coll, "scatter")) MPI_Scatter(send, c, MPI_FLOAT, recv, c, MPI_FLOAT, 0, MPI_COMM_WORLD);
  (void)n;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (argc < 7) {
    if (rank == 0) fprintf(stderr, "usage: mpi_bench COLLECTIVE MIN MAX FACTOR ITERS WARMUP\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const char* coll = argv[1];
  size_t minBytes = strtoull(argv[2], 0, 0), maxBytes = strtoull(argv[3], 0, 0);
  int factor = atoi(argv[4]), iters = atoi(argv[5]), warmup = atoi(argv[6]);
  int percentiles = argc > 7 && atoi(argv[7]) == 1;
  double* took = malloc(sizeof(double) * (size_t)iters);
  /* Collectives whose size is the whole multi-block buffer split it by n, as loom-perf does. */
  int blocked = !strcmp(coll, "all_gather") || !strcmp(coll, "reduce_scatter") || !strcmp(coll, "alltoall") ||
                !strcmp(coll, "gather") || !strcmp(coll, "scatter");
  float* send = malloc(maxBytes + 64);
  float* recv = malloc(maxBytes + 64);
  memset(send, 0, maxBytes + 64);
  memset(recv, 0, maxBytes + 64);
  for (size_t bytes = minBytes; bytes <= maxBytes; bytes *= (size_t)factor) {
    size_t count = bytes / sizeof(float) / (blocked ? (size_t)n : 1);
    if (count == 0) count = 1;
    for (int i = 0; i < warmup; ++i) run(coll, send, recv, count, n);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime(), last = t0;
    for (int i = 0; i < iters; ++i) {
      run(coll, send, recv, count, n);
      if (percentiles) {
        double now = MPI_Wtime();
        took[i] = now - last;
        last = now;
      }
    }
    double mine = (MPI_Wtime() - t0) / iters, sum = 0;
    MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (percentiles) {
      MPI_Allreduce(MPI_IN_PLACE, took, iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      qsort(took, (size_t)iters, sizeof(double), byValue);
    }
    if (rank == 0) {
      double us = sum / n * 1e6, size = (double)count * sizeof(float) * (blocked ? n : 1);
      double algbw = size / (us * 1e3);
      printf("{\"library\":\"mpich\",\"collective\":\"%s\",\"bytes\":%.0f,\"nranks\":%d,\"time_us\":%.3f,"
             "\"algbw_gbs\":%.4f,\"busbw_gbs\":%.4f", coll, size, n, us, algbw, algbw * busFactor(coll, n));
      if (percentiles)
        printf(",\"p50_us\":%.3f,\"p99_us\":%.3f,\"max_us\":%.3f", percentile(took, iters, 0.5) * 1e6,
               percentile(took, iters, 0.99) * 1e6, took[iters - 1] * 1e6);
      printf("}\n");
      fflush(stdout);
    }
    if (factor <= 1) break;
  }
  free(send);
  free(recv);
  free(took);
  MPI_Finalize();
  return 0;
}
