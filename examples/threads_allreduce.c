/* Loom with one thread per rank, in one process: the main thread makes the unique id, each thread joins
 * the communicator with its rank and runs an allreduce (sum) from its own buffer into another, then
 * checks every element. The same code runs with processes or hosts in place of threads once the id
 * travels to them (mpi_allreduce.c hands it over with MPI_Bcast).
 *
 *   build/examples/threads_allreduce [nranks (4)] [count (1048576)]
 *
 * Exit status 0 when every rank saw the right sum. */
#define _POSIX_C_SOURCE 200809L /* nanosleep, under -std=c11 */

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

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

static void* run_rank(void* p) {
  struct rank_args* a = p;
  loomComm_t comm = NULL;
  float* send = malloc(a->count * sizeof(float));
  float* recv = malloc(a->count * sizeof(float));
  if (!send || !recv) {
    a->failed = 1;
    free(send), free(recv);
    return NULL;
  }
  for (size_t i = 0; i < a->count; ++i) send[i] = (float)(a->rank + 1) + (float)(i % 7);
  a->failed = check(loomCommInitRank(&comm, a->nranks, a->id, a->rank), "loomCommInitRank", NULL, a->rank);
  if (!a->failed)
    a->failed = check(loomAllReduce(send, recv, a->count, loomFloat32, loomSum, comm, NULL), "loomAllReduce", comm, a->rank);
  /* Rank r gives r + 1 + i mod 7: the sum is n(n+1)/2 + n (i mod 7), exact in float at these sizes. */
  for (size_t i = 0; !a->failed && i < a->count; ++i) {
    const float want = (float)(a->nranks * (a->nranks + 1) / 2) + (float)a->nranks * (float)(i % 7);
    if (recv[i] != want) {
      fprintf(stderr, "rank %d: element %zu is %g, expected %g\n", a->rank, i, recv[i], want);
      a->failed = 1;
    }
  }
  if (comm) loomCommDestroy(comm);
  free(send);
  free(recv);
  return NULL;
}

int main(int argc, char** argv) {
  const int nranks = argc > 1 ? atoi(argv[1]) : 4;
  const size_t count = argc > 2 ? (size_t)strtoull(argv[2], NULL, 10) : (size_t)1 << 20;
  if (nranks < 1 || nranks > 256) {
    fprintf(stderr, "usage: %s [nranks 1..256] [count]\n", argv[0]);
    return 2;
  }
  loomUniqueId id;
  if (check(loomGetUniqueId(&id), "loomGetUniqueId", NULL, 0)) return 1;
  pthread_t threads[256];
  struct rank_args args[256];
  for (int r = 0; r < nranks; ++r) {
    args[r] = (struct rank_args){.rank = r, .nranks = nranks, .count = count, .id = id, .failed = 0};
    pthread_create(&threads[r], NULL, run_rank, &args[r]);
  }
  int failed = 0;
  for (int r = 0; r < nranks; ++r) {
    pthread_join(threads[r], NULL);
    failed |= args[r].failed;
  }
  printf("%s: %d ranks as threads, allreduce of %zu floats %s\n", argv[0], nranks, count, failed ? "FAILED" : "correct");
  return failed;
}
