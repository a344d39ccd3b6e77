/* A program written for NCCL, compiled against NVIDIA's nccl.h and linked with -lnccl, run with Loom's
 * libnccl.so.2: every collective, grouped send/recv, ncclCommSplit, a PreMulSum operator, a
 * nonblocking init polled with ncclCommGetAsyncError, registration, the parameter calls (2.30
 * headers), ncclGroupSimulateEnd, ncclCommShrink and ncclCommRevoke, and bad arguments, on host memory, each result checked element by element. Built against
 * each NVIDIA header found (an older header's smaller ncclConfig_t must work as well).
 *
 *   nccl_client threads|processes|initall|grouped NRANKS
 *
 * Ranks are threads of this process or forked processes (the unique id made before the fork); with
 * `initall`, ncclCommInitAll makes every rank's communicator and one thread drives them all, each
 * call of a rank inside ncclGroupStart/End as NCCL programs do; `grouped` makes them as nccl-tests
 * does by default: one thread calls ncclCommInitRank (and ncclCommInitRankConfig, its config gone
 * before the group ends) for every rank inside one ncclGroupStart/End. Exit status 0 when every rank
 * passed. */
#define _POSIX_C_SOURCE 200809L

#include <nccl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define COUNT 1003 /* elements per rank: not a multiple of anything the library cuts by */

struct rank_args {
  int rank, nranks;
  ncclUniqueId id;
  int failed;
};

#define CHECK(call)                                                                                        \
  do {                                                                                                     \
    ncclResult_t r_ = (call);                                                                              \
    if (r_ != ncclSuccess) {                                                                               \
      fprintf(stderr, "rank %d: %s: %s (%s)\n", a->rank, #call, ncclGetErrorString(r_), ncclGetLastError(comm)); \
      return 1;                                                                                            \
    }                                                                                                      \
  } while (0)

#define EXPECT(cond, ...)                                  \
  do {                                                     \
    if (!(cond)) {                                         \
      fprintf(stderr, "rank %d: ", a->rank);               \
      fprintf(stderr, __VA_ARGS__);                        \
      fprintf(stderr, " (%s:%d)\n", __FILE__, __LINE__);   \
      return 1;                                            \
    }                                                      \
  } while (0)

static int value(int rank, int i) { return (rank + 1) * 1000 + i % 97; }

static int collectives(struct rank_args* a, ncclComm_t comm) {
  const int n = a->nranks, me = a->rank;
  int* send = malloc(sizeof(int) * COUNT * n);
  int* recv = malloc(sizeof(int) * COUNT * n);
  if (!send || !recv) return 1;
  for (int i = 0; i < COUNT * n; ++i) send[i] = value(me, i);

  CHECK(ncclAllReduce(send, recv, COUNT, ncclInt32, ncclSum, comm, NULL));
  for (int i = 0; i < COUNT; ++i) {
    int want = 0;
    for (int r = 0; r < n; ++r) want += value(r, i);
    EXPECT(recv[i] == want, "allreduce[%d] = %d, expected %d", i, recv[i], want);
  }

  memcpy(recv, send, sizeof(int) * COUNT);
  CHECK(ncclBcast(recv, COUNT, ncclInt32, n - 1, comm, NULL));
  for (int i = 0; i < COUNT; ++i) EXPECT(recv[i] == value(n - 1, i), "bcast[%d] = %d", i, recv[i]);

  CHECK(ncclBroadcast(send, recv, COUNT, ncclInt32, 0, comm, NULL));
  for (int i = 0; i < COUNT; ++i) EXPECT(recv[i] == value(0, i), "broadcast[%d] = %d", i, recv[i]);

  CHECK(ncclReduce(send, recv, COUNT, ncclInt32, ncclMax, 0, comm, NULL));
  for (int i = 0; me == 0 && i < COUNT; ++i) EXPECT(recv[i] == value(n - 1, i), "reduce max[%d] = %d", i, recv[i]);

  CHECK(ncclAllGather(send, recv, COUNT, ncclInt32, comm, NULL));
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < COUNT; ++i) EXPECT(recv[r * COUNT + i] == value(r, i), "allgather[%d][%d]", r, i);

  CHECK(ncclReduceScatter(send, recv, COUNT, ncclInt32, ncclSum, comm, NULL));
  for (int i = 0; i < COUNT; ++i) {
    int want = 0;
    for (int r = 0; r < n; ++r) want += value(r, me * COUNT + i);
    EXPECT(recv[i] == want, "reducescatter[%d] = %d, expected %d", i, recv[i], want);
  }

  /* All-to-all: block b of rank r goes to rank b as its block r. */
  CHECK(ncclAlltoAll(send, recv, COUNT, ncclInt32, comm, NULL));
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < COUNT; ++i)
      EXPECT(recv[r * COUNT + i] == value(r, me * COUNT + i), "alltoall[%d][%d]", r, i);

  CHECK(ncclGather(send, recv, COUNT, ncclInt32, 0, comm, NULL));
  for (int r = 0; me == 0 && r < n; ++r)
    for (int i = 0; i < COUNT; ++i) EXPECT(recv[r * COUNT + i] == value(r, i), "gather[%d][%d]", r, i);

  CHECK(ncclScatter(send, recv, COUNT, ncclInt32, n - 1, comm, NULL));
  for (int i = 0; i < COUNT; ++i) EXPECT(recv[i] == value(n - 1, me * COUNT + i), "scatter[%d]", i);

  /* A ring of sends and receives in one group. */
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  CHECK(ncclGroupStart());
  CHECK(ncclSend(send, COUNT, ncclInt32, next, comm, NULL));
  CHECK(ncclRecv(recv, COUNT, ncclInt32, prev, comm, NULL));
  CHECK(ncclGroupEnd());
  for (int i = 0; i < COUNT; ++i) EXPECT(recv[i] == value(prev, i), "recv from %d [%d] = %d", prev, i, recv[i]);

  free(send);
  free(recv);
  return 0;
}

static int premulsum(struct rank_args* a, ncclComm_t comm) {
  float send[COUNT], recv[COUNT], scale = 0.5f;
  for (int i = 0; i < COUNT; ++i) send[i] = (float)(2 * (a->rank + 1) * (i % 5));
  ncclRedOp_t op;
  CHECK(ncclRedOpCreatePreMulSum(&op, &scale, ncclFloat32, ncclScalarHostImmediate, comm));
  CHECK(ncclAllReduce(send, recv, COUNT, ncclFloat32, op, comm, NULL));
  CHECK(ncclRedOpDestroy(op, comm));
  const int n = a->nranks;
  for (int i = 0; i < COUNT; ++i) {
    const float want = (float)(n * (n + 1) / 2 * (i % 5));
    EXPECT(recv[i] == want, "premulsum[%d] = %g, expected %g", i, recv[i], want);
  }
  return 0;
}

static int split(struct rank_args* a, ncclComm_t comm) {
  ncclComm_t half = NULL;
  /* Even and odd ranks, each half in reverse order. */
  CHECK(ncclCommSplit(comm, a->rank % 2, -a->rank, &half, NULL));
  int count = 0, rank = -1;
  CHECK(ncclCommCount(half, &count));
  CHECK(ncclCommUserRank(half, &rank));
  const int mine = (a->nranks - a->rank % 2 + 1) / 2;
  EXPECT(count == mine, "split: %d ranks, expected %d", count, mine);
  EXPECT(rank == count - 1 - a->rank / 2, "split: rank %d", rank);
  int one = 1, total = 0;
  CHECK(ncclAllReduce(&one, &total, 1, ncclInt32, ncclSum, half, NULL));
  EXPECT(total == count, "allreduce over the split: %d", total);
  CHECK(ncclCommDestroy(half));
  return 0;
}

static int registration(struct rank_args* a, ncclComm_t comm) {
  int buffer[16];
  void* handle = NULL;
  CHECK(ncclCommRegister(comm, buffer, sizeof buffer, &handle));
  CHECK(ncclCommDeregister(comm, handle));
  int dummy = 0;
  EXPECT(ncclCommDeregister(comm, &dummy) == ncclInvalidArgument, "a foreign handle is refused");
  EXPECT(strstr(ncclGetLastError(comm), "ncclCommRegister") != NULL, "the refusal says why: %s", ncclGetLastError(comm));
  /* A window is device memory, registered by every rank: host memory is refused on every rank, saying so
     (the GPU tests register real ones). */
  ncclWindow_t win = (ncclWindow_t)buffer;
  EXPECT(ncclCommWindowRegister(comm, buffer, sizeof buffer, &win, NCCL_WIN_COLL_SYMMETRIC) != ncclSuccess && win == NULL,
         "a window of host memory");
  EXPECT(strstr(ncclGetLastError(comm), "device memory") != NULL, "the refusal says why: %s", ncclGetLastError(comm));
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 29, 0)
  void* user = NULL;
  EXPECT(ncclWinGetUserPtr(comm, (ncclWindow_t)&dummy, &user) != ncclSuccess, "a foreign window is refused");
#endif
  return 0;
}

/* Device memory: served where a GPU is, refused with a reason elsewhere. */
static int memory(struct rank_args* a, ncclComm_t comm) {
  void* p = NULL;
  ncclResult_t r = ncclMemAlloc(&p, 4096);
  if (r == ncclSuccess) {
    EXPECT(p != NULL, "ncclMemAlloc gave NULL");
    CHECK(ncclMemFree(p));
  } else {
    EXPECT(r == ncclInvalidUsage && p == NULL, "ncclMemAlloc without a GPU: %s", ncclGetErrorString(r));
    EXPECT(strstr(ncclGetLastError(NULL), "device memory") != NULL, "says: %s", ncclGetLastError(NULL));
  }
  return 0;
}

static int bad_arguments(struct rank_args* a, ncclComm_t comm) {
  int x = 0;
  EXPECT(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, NULL, NULL) == ncclInvalidArgument, "NULL comm");
  EXPECT(ncclAllReduce(&x, &x, 1, (ncclDataType_t)99, ncclSum, comm, NULL) == ncclInvalidArgument, "datatype 99");
  EXPECT(strlen(ncclGetLastError(comm)) > 0, "an error text");
  EXPECT(ncclBroadcast(&x, &x, 1, ncclInt32, a->nranks, comm, NULL) == ncclInvalidArgument, "root out of range");
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.magic = 0;
  ncclComm_t other = NULL;
  EXPECT(ncclCommInitRankConfig(&other, a->nranks, a->id, a->rank, &config) == ncclInvalidArgument, "bad config");
  EXPECT(strstr(ncclGetLastError(NULL), "NCCL_CONFIG_INITIALIZER") != NULL, "says: %s", ncclGetLastError(NULL));
  EXPECT(ncclCommShrink(comm, &a->rank, 1, &other, NULL, NCCL_SHRINK_DEFAULT) == ncclInvalidArgument,
         "a rank excluding itself");
  EXPECT(strstr(ncclGetLastError(comm), "excludes itself") != NULL, "says: %s", ncclGetLastError(comm));
  return 0;
}

/* A second communicator made without blocking: init may answer ncclInProgress, then
 * ncclCommGetAsyncError says when it is ready. */
static int nonblocking_init(struct rank_args* a, ncclComm_t comm) {
  ncclUniqueId id;
  if (a->rank == 0) CHECK(ncclGetUniqueId(&id));
  CHECK(ncclBroadcast(&id, &id, sizeof id, ncclUint8, 0, comm, NULL));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = "nonblocking";
  ncclComm_t nb = NULL;
  ncclResult_t r = ncclCommInitRankConfig(&nb, a->nranks, id, a->rank, &config);
  EXPECT(r == ncclSuccess || r == ncclInProgress, "nonblocking init: %s", ncclGetErrorString(r));
  ncclResult_t state = ncclInProgress;
  for (int tries = 0; state == ncclInProgress && tries < 1200000; ++tries) {
    CHECK(ncclCommGetAsyncError(nb, &state));
    if (state == ncclInProgress) nanosleep(&(struct timespec){.tv_nsec = 100000}, NULL);
  }
  EXPECT(state == ncclSuccess, "nonblocking init ended with %s", ncclGetErrorString(state));
  int count = 0;
  CHECK(ncclCommCount(nb, &count));
  EXPECT(count == a->nranks, "nonblocking comm has %d ranks", count);
  CHECK(ncclCommDestroy(nb));
  return 0;
}

static int parameters(struct rank_args* a, ncclComm_t comm) {
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 30, 0) /* the ncclParam calls came with 2.30 */
  ncclParamHandle_t h;
  CHECK(ncclParamBind(&h, "LOOM_TIMEOUT_MS"));
  int64_t timeout = 0;
  CHECK(ncclParamGetI64(h, &timeout));
  EXPECT(timeout > 0, "LOOM_TIMEOUT_MS reads %lld", (long long)timeout);
  /* NCCL's own name for a setting Loom reads. */
  CHECK(ncclParamBind(&h, "NCCL_SOCKET_IFNAME"));
  const char* ifname = NULL;
  CHECK(ncclParamGetStr(h, &ifname));
  EXPECT(ifname != NULL, "NCCL_SOCKET_IFNAME reads NULL");
#else
  (void)a, (void)comm;
#endif
  return 0;
}

/* ncclGroupSimulateEnd: Loom's cost model times the group and nothing runs; the group is closed after. */
static int simulate(struct rank_args* a, ncclComm_t comm) {
  enum { BIG = 1 << 20 };
  float* send = calloc(BIG, sizeof(float));
  float* recv = malloc(BIG * sizeof(float));
  if (!send || !recv) return 1;
  for (int i = 0; i < BIG; ++i) recv[i] = -1.0f;
  ncclSimInfo_t small = NCCL_SIM_INFO_INITIALIZER, big = NCCL_SIM_INFO_INITIALIZER, p2p = NCCL_SIM_INFO_INITIALIZER;
  CHECK(ncclGroupStart());
  CHECK(ncclAllReduce(send, recv, 256, ncclFloat32, ncclSum, comm, NULL));
  CHECK(ncclGroupSimulateEnd(&small));
  CHECK(ncclGroupStart());
  CHECK(ncclAllReduce(send, recv, BIG, ncclFloat32, ncclSum, comm, NULL));
  CHECK(ncclGroupSimulateEnd(&big));
  const int n = a->nranks, me = a->rank;
  CHECK(ncclGroupStart());
  CHECK(ncclSend(send, BIG, ncclFloat32, (me + 1) % n, comm, NULL));
  CHECK(ncclRecv(recv, BIG, ncclFloat32, (me + n - 1) % n, comm, NULL));
  CHECK(ncclGroupSimulateEnd(&p2p));
  for (int i = 0; i < BIG; ++i) EXPECT(recv[i] == -1.0f, "a simulated group wrote recv[%d]", i);
  if (n > 1) {
    EXPECT(small.estimatedTime > 0 && big.estimatedTime > 2 * small.estimatedTime && p2p.estimatedTime > 0,
           "estimates: 1 KiB allreduce %g us, 4 MiB allreduce %g us, 4 MiB send/recv %g us", small.estimatedTime,
           big.estimatedTime, p2p.estimatedTime);
  } else {
    EXPECT(small.estimatedTime == 0 && big.estimatedTime == 0, "one rank moves nothing: %g, %g", small.estimatedTime,
           big.estimatedTime);
  }
  /* Misuse: no group open; a struct not made by the initializer (the group stays open, then runs). */
  EXPECT(ncclGroupSimulateEnd(&small) == ncclInvalidUsage, "simulate without a group");
  ncclSimInfo_t bad = NCCL_SIM_INFO_INITIALIZER;
  bad.magic = 0;
  int one = 1, total = 0;
  CHECK(ncclGroupStart());
  CHECK(ncclAllReduce(&one, &total, 1, ncclInt32, ncclSum, comm, NULL));
  EXPECT(ncclGroupSimulateEnd(&bad) == ncclInvalidArgument, "a bad simInfo is refused");
  EXPECT(strstr(ncclGetLastError(comm), "NCCL_SIM_INFO_INITIALIZER") != NULL, "says: %s", ncclGetLastError(comm));
  CHECK(ncclGroupEnd());
  EXPECT(total == n, "the group after a refused simulation ran: %d", total);
  free(send);
  free(recv);
  return 0;
}

/* ncclCommShrink without the last rank (it takes no part), then ncclCommRevoke of the smaller one. */
static int shrink_and_revoke(struct rank_args* a, ncclComm_t comm) {
  const int last = a->nranks - 1;
  if (a->nranks < 2 || a->rank == last) return 0;
  int excluded = last;
  ncclComm_t smaller = NULL;
  CHECK(ncclCommShrink(comm, &excluded, 1, &smaller, NULL, NCCL_SHRINK_DEFAULT));
  int count = 0, rank = -1;
  CHECK(ncclCommCount(smaller, &count));
  CHECK(ncclCommUserRank(smaller, &rank));
  EXPECT(count == a->nranks - 1 && rank == a->rank, "shrunk to rank %d of %d", rank, count);
  int one = 1, total = 0;
  CHECK(ncclAllReduce(&one, &total, 1, ncclInt32, ncclSum, smaller, NULL));
  EXPECT(total == count, "allreduce over the shrunk comm: %d", total);
  CHECK(ncclCommRevoke(smaller, NCCL_REVOKE_DEFAULT));
  EXPECT(ncclAllReduce(&one, &total, 1, ncclInt32, ncclSum, smaller, NULL) != ncclSuccess, "a revoked comm runs");
  EXPECT(strstr(ncclGetLastError(smaller), "revoked") != NULL, "says: %s", ncclGetLastError(smaller));
  CHECK(ncclCommDestroy(smaller));
  return 0;
}

static int run(struct rank_args* a) {
  ncclComm_t comm = NULL;
  int version = 0;
  CHECK(ncclGetVersion(&version));
  EXPECT(version >= NCCL_VERSION(2, 30, 0), "ncclGetVersion says %d", version);
  CHECK(ncclCommInitRank(&comm, a->nranks, a->id, a->rank));
  int count = 0, rank = -1;
  CHECK(ncclCommCount(comm, &count));
  CHECK(ncclCommUserRank(comm, &rank));
  EXPECT(count == a->nranks && rank == a->rank, "count %d rank %d", count, rank);
  int failed = collectives(a, comm) || premulsum(a, comm) || split(a, comm) || registration(a, comm) ||
               nonblocking_init(a, comm) || parameters(a, comm) || memory(a, comm) || simulate(a, comm) ||
               bad_arguments(a, comm) || shrink_and_revoke(a, comm);
  CHECK(ncclCommFinalize(comm));
  CHECK(ncclCommDestroy(comm));
  return failed;
}

/* One thread drives every rank's communicator: an all-reduce and a broadcast, each a group. */
static int drive_all(ncclComm_t* comms, int n) {
  struct rank_args args = {.rank = 0, .nranks = n}, *a = &args;
  ncclComm_t comm = NULL;
  static int send[64][COUNT], recv[64][COUNT];
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < COUNT; ++i) send[r][i] = value(r, i);
  CHECK(ncclGroupStart());
  for (int r = 0; r < n; ++r) CHECK(ncclAllReduce(send[r], recv[r], COUNT, ncclInt32, ncclSum, comms[r], NULL));
  CHECK(ncclGroupEnd());
  for (int r = 0; r < n; ++r) {
    int rank = -1;
    CHECK(ncclCommUserRank(comms[r], &rank));
    EXPECT(rank == r, "comms[%d] is rank %d", r, rank);
    for (int i = 0; i < COUNT; ++i) {
      int want = 0;
      for (int q = 0; q < n; ++q) want += value(q, i);
      EXPECT(recv[r][i] == want, "initall allreduce rank %d [%d] = %d, expected %d", r, i, recv[r][i], want);
    }
  }
  CHECK(ncclGroupStart());
  for (int r = 0; r < n; ++r) CHECK(ncclBroadcast(send[r], recv[r], COUNT, ncclInt32, n - 1, comms[r], NULL));
  CHECK(ncclGroupEnd());
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < COUNT; ++i) EXPECT(recv[r][i] == value(n - 1, i), "initall broadcast rank %d [%d]", r, i);
  for (int r = 0; r < n; ++r) CHECK(ncclCommDestroy(comms[r]));
  return 0;
}

/* One thread, every rank's communicator from ncclCommInitAll. */
static int run_init_all(int n) {
  struct rank_args args = {.rank = 0, .nranks = n}, *a = &args;
  ncclComm_t comms[64], comm = NULL;
  CHECK(ncclCommInitAll(comms, n, NULL));
  return drive_all(comms, n);
}

/* One thread, every rank's ncclCommInitRank inside one group (nccl-tests' default init): the inits
 * wait for each other, so they can only complete together, at ncclGroupEnd. Rank 0 passes a config
 * whose storage (and name) is gone by then. */
static int run_grouped(int n) {
  struct rank_args args = {.rank = 0, .nranks = n}, *a = &args;
  ncclComm_t comms[64], comm = NULL;
  ncclUniqueId id;
  CHECK(ncclGetUniqueId(&id));
  CHECK(ncclGroupStart());
  {
    char name[32];
    snprintf(name, sizeof name, "grouped-%d", n);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.commName = name;
    CHECK(ncclCommInitRankConfig(&comms[0], n, id, 0, &config));
    memset(name, 'x', sizeof name - 1);
    memset(&config, 0xff, sizeof config);
  }
  for (int r = 1; r < n; ++r) CHECK(ncclCommInitRank(&comms[r], n, id, r));
  CHECK(ncclGroupEnd());
  for (int r = 0; r < n; ++r) EXPECT(comms[r] != NULL, "rank %d has no communicator after ncclGroupEnd", r);
  return drive_all(comms, n);
}

static void* thread_main(void* p) {
  struct rank_args* a = p;
  a->failed = run(a);
  return NULL;
}

int main(int argc, char** argv) {
  const int processes = argc > 1 && strcmp(argv[1], "processes") == 0;
  const int nranks = argc > 2 ? atoi(argv[2]) : 2;
  if (argc < 3 || nranks < 1 || nranks > 64) {
    fprintf(stderr, "usage: %s threads|processes|initall|grouped NRANKS\n", argv[0]);
    return 2;
  }
  if (strcmp(argv[1], "initall") == 0) {
    const int failed = run_init_all(nranks);
    printf("%s: %d ranks from ncclCommInitAll, one thread: %s\n", argv[0], nranks, failed ? "FAILED" : "passed");
    return failed;
  }
  if (strcmp(argv[1], "grouped") == 0) {
    const int failed = run_grouped(nranks);
    printf("%s: %d ranks from grouped ncclCommInitRank, one thread: %s\n", argv[0], nranks,
           failed ? "FAILED" : "passed");
    return failed;
  }
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    fprintf(stderr, "ncclGetUniqueId: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  struct rank_args args[64];
  int failed = 0;
  if (processes) {
    pid_t pids[64];
    for (int r = 0; r < nranks; ++r) {
      args[r] = (struct rank_args){.rank = r, .nranks = nranks, .id = id};
      pids[r] = fork();
      if (pids[r] == 0) _exit(run(&args[r]));
    }
    for (int r = 0; r < nranks; ++r) {
      int status = 0;
      waitpid(pids[r], &status, 0);
      failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    }
  } else {
    pthread_t threads[64];
    for (int r = 0; r < nranks; ++r) {
      args[r] = (struct rank_args){.rank = r, .nranks = nranks, .id = id};
      pthread_create(&threads[r], NULL, thread_main, &args[r]);
    }
    for (int r = 0; r < nranks; ++r) {
      pthread_join(threads[r], NULL);
      failed |= args[r].failed;
    }
  }
  printf("%s: %d ranks as %s: %s\n", argv[0], nranks, processes ? "processes" : "threads", failed ? "FAILED" : "passed");
  return failed;
}
