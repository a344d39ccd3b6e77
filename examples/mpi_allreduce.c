/* Loom under MPI, the way NCCL programs start: rank 0 makes the unique id, MPI_Bcast hands it to
 * every rank, each rank joins the communicator, then an in-place allreduce whose every element is
 * checked. Run it with any launcher, on one host or across hosts:
 *
 *   mpiexec -n 4 build/examples/mpi_allreduce [count]
 *
 * Exit status 0 when every rank saw the right sum. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom.h"

static int check(loomResult_t r, const char* what, loomComm_t comm, int rank) {
  if (r == loomSuccess) return 0;
  fprintf(stderr, "rank %d: %s: %s: %s\n", rank, what, loomGetErrorString(r), loomGetLastError(comm));
  return 1;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  const size_t count = argc > 1 ? strtoull(argv[1], NULL, 10) : (size_t)1 << 20;

  loomUniqueId id;
  memset(&id, 0, sizeof id);
  int failed = rank == 0 ? check(loomGetUniqueId(&id), "loomGetUniqueId", NULL, rank) : 0;
  MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (failed) MPI_Abort(MPI_COMM_WORLD, 1);
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);

  loomComm_t comm = NULL;
  if (check(loomCommInitRank(&comm, nranks, id, rank), "loomCommInitRank", NULL, rank)) MPI_Abort(MPI_COMM_WORLD, 1);

  /* Rank r contributes r + 1 + i % 7 at element i: the sum is exact in float for any rank count here. */
  float* data = malloc(count * sizeof(float));
  for (size_t i = 0; i < count; ++i) data[i] = (float)(rank + 1 + i % 7);
  const double start = MPI_Wtime();
  failed = check(loomAllReduce(data, data, count, loomFloat32, loomSum, comm, NULL), "loomAllReduce", comm, rank);
  const double seconds = MPI_Wtime() - start;
  long wrong = 0;
  for (size_t i = 0; !failed && i < count; ++i) {
    const float want = (float)nranks * (nranks + 1) / 2 + (float)nranks * (i % 7);
    if (data[i] != want && wrong++ == 0)
      fprintf(stderr, "rank %d: element %zu is %g, expected %g\n", rank, i, data[i], want);
  }
  long totalWrong = 0;
  int anyFailed = 0;
  MPI_Reduce(&wrong, &totalWrong, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(&failed, &anyFailed, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0)
    printf("mpi_allreduce: %d ranks, %zu floats in %.3f ms: %s (%ld wrong elements)\n", nranks, count, seconds * 1e3,
           totalWrong == 0 && !anyFailed ? "OK" : "FAILED", totalWrong);
  free(data);
  loomCommDestroy(comm);
  const int status = rank == 0 ? (totalWrong == 0 && !anyFailed ? 0 : 1) : (wrong == 0 && !failed ? 0 : 1);
  MPI_Finalize();
  return status;
}
