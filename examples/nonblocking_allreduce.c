/* A nonblocking communicator (loomConfig_t.blocking = 0, as NCCL's): calls queue their operation and
 * return at once, so the caller computes while the data moves, then waits for the operation by its id
 * (loomCommWaitOp, Loom's extension for host memory; NCCL programs wait on their CUDA stream). Here each
 * rank thread starts an allreduce of one buffer, fills the next buffer meanwhile, and checks both.
 *
 *   build/examples/nonblocking_allreduce [nranks (2)] [count (4194304)]
 *
 * Exit status 0 when every result is right. */
#define _POSIX_C_SOURCE 200809L /* nanosleep, under -std=c11 */

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "loom.h"

struct rank_args {
  int rank, nranks;
  size_t count;
  loomUniqueId id;
  int failed;
};

static int check(loomResult_t r, const char* what, loomComm_t comm, int rank) {
  if (r == loomSuccess) return 0;
  fprintf(stderr, "rank %d: %s: %s: %s\n", rank, what, loomGetErrorString(r), loomGetLastError(comm));
  return 1;
}

static int verify(const double* x, size_t count, int nranks, int round, int rank) {
  for (size_t i = 0; i < count; ++i) {
    const double want = (double)nranks * (double)(round + (int)(i % 5)) + nranks * (nranks - 1) / 2.0;
    if (x[i] != want) {
      fprintf(stderr, "rank %d: round %d element %zu is %g, expected %g\n", rank, round, i, x[i], want);
      return 1;
    }
  }
  return 0;
}

static void fill(double* x, size_t count, int round, int rank) {
  for (size_t i = 0; i < count; ++i) x[i] = (double)(round + (int)(i % 5)) + rank;
}

static void* run_rank(void* p) {
  struct rank_args* a = p;
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = "nonblocking example";
  loomComm_t comm = NULL;
  double* buffers[2] = {malloc(a->count * sizeof(double)), malloc(a->count * sizeof(double))};
  if (!buffers[0] || !buffers[1]) {
    a->failed = 1;
    goto done;
  }
  /* A nonblocking init may return loomInProgress: the communicator is ready once its async error
   * stops saying so. */
  loomResult_t r = loomCommInitRankConfig(&comm, a->nranks, a->id, a->rank, &config);
  if (r == loomInProgress) {
    loomResult_t state = loomInProgress;
    const struct timespec pause = {0, 100 * 1000};  /* 0.1 ms: the threads finishing init need the cores */
    while (loomCommGetAsyncError(comm, &state) == loomSuccess && state == loomInProgress) nanosleep(&pause, NULL);
    r = state;
  }
  if ((a->failed = check(r, "loomCommInitRankConfig", comm, a->rank))) goto done;

  fill(buffers[0], a->count, 0, a->rank);
  r = loomAllReduce(buffers[0], buffers[0], a->count, loomFloat64, loomSum, comm, NULL);  /* returns at once */
  if ((a->failed = check(r == loomInProgress ? loomSuccess : r, "loomAllReduce", comm, a->rank))) goto done;
  uint64_t first = 0;
  loomCommLastOpId(comm, &first);
  fill(buffers[1], a->count, 1, a->rank);  /* overlaps the first allreduce; buffers[0] is Loom's meanwhile */
  r = loomAllReduce(buffers[1], buffers[1], a->count, loomFloat64, loomSum, comm, NULL);
  if ((a->failed = check(r == loomInProgress ? loomSuccess : r, "loomAllReduce", comm, a->rank))) goto done;
  uint64_t second = 0;
  loomCommLastOpId(comm, &second);

  if ((a->failed = check(loomCommWaitOp(comm, first, -1), "loomCommWaitOp", comm, a->rank))) goto done;
  a->failed = verify(buffers[0], a->count, a->nranks, 0, a->rank);  /* the second may still be running */
  if (!a->failed) a->failed = check(loomCommWaitOp(comm, second, -1), "loomCommWaitOp", comm, a->rank);
  if (!a->failed) a->failed = verify(buffers[1], a->count, a->nranks, 1, a->rank);
done:
  if (comm) {
    loomCommFinalize(comm);
    loomCommDestroy(comm);
  }
  free(buffers[0]);
  free(buffers[1]);
  return NULL;
}

int main(int argc, char** argv) {
  const int nranks = argc > 1 ? atoi(argv[1]) : 2;
  const size_t count = argc > 2 ? (size_t)strtoull(argv[2], NULL, 10) : (size_t)1 << 22;
  if (nranks < 1 || nranks > 64) {
    fprintf(stderr, "usage: %s [nranks 1..64] [count]\n", argv[0]);
    return 2;
  }
  loomUniqueId id;
  if (check(loomGetUniqueId(&id), "loomGetUniqueId", NULL, 0)) return 1;
  pthread_t threads[64];
  struct rank_args args[64];
  for (int r = 0; r < nranks; ++r) {
    args[r] = (struct rank_args){.rank = r, .nranks = nranks, .count = count, .id = id, .failed = 0};
    pthread_create(&threads[r], NULL, run_rank, &args[r]);
  }
  int failed = 0;
  for (int r = 0; r < nranks; ++r) {
    pthread_join(threads[r], NULL);
    failed |= args[r].failed;
  }
  printf("%s: %d ranks, two overlapping allreduces of %zu doubles %s\n", argv[0], nranks, count,
         failed ? "FAILED" : "correct");
  return failed;
}
