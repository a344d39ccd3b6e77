/* Shrink time: N ranks make a communicator; rank N-1 is lost (a thread that stops taking part, or a
 * process that exits); the others call loomCommShrink excluding it. Timed from the first survivor's
 * call to the last survivor's return, after the loss is known (detection is not timed), R times;
 * prints the median, the fastest and the slowest in milliseconds as one JSON line per mode. A
 * benchmark, not a test.
 *   cc -O2 -o shrink_bench perf/shrink_bench.c $(pkg-config --cflags --libs loom) -lpthread
 *   ./shrink_bench threads|processes [N] [R] */
#include <loom.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { kMostRanks = 256 };

static double nowMs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int byValue(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* Where each survivor writes when its call began and ended (shared with forked processes). */
struct Times {
  double begin[kMostRanks];
  double end[kMostRanks];
  int failed;
  volatile int lost; /* set once the lost rank is gone */
};

static double span(const struct Times* t, int survivors) {
  double first = t->begin[0], last = t->end[0];
  for (int r = 1; r < survivors; ++r) {
    if (t->begin[r] < first) first = t->begin[r];
    if (t->end[r] > last) last = t->end[r];
  }
  return last - first;
}

static void shrinkAndTime(loomComm_t comm, int rank, int lost, struct Times* t) {
  loomComm_t child = NULL;
  t->begin[rank] = nowMs();
  loomResult_t st = loomCommShrink(comm, &lost, 1, &child, NULL, LOOM_SHRINK_DEFAULT);
  t->end[rank] = nowMs();
  if (st != loomSuccess) {
    fprintf(stderr, "rank %d: loomCommShrink: %s\n", rank, loomGetLastError(comm));
    t->failed = 1;
    return;
  }
  const int survivors = lost; /* the lost rank is the last one */
  int one = 1, sum = 0;         /* the child works: every survivor counted */
  if (loomAllReduce(&one, &sum, 1, loomInt32, loomSum, child, NULL) != loomSuccess || sum != survivors) t->failed = 1;
  loomCommDestroy(child);
}

/* ---- rank threads ---- */
static loomComm_t comms[kMostRanks];
static struct Times threadTimes;
static pthread_barrier_t ready;
static int nthreads;

static void* survivor(void* arg) {
  int rank = (int)(long)arg;
  pthread_barrier_wait(&ready);
  shrinkAndTime(comms[rank], rank, nthreads - 1, &threadTimes);
  return NULL;
}

static double threadsOnce(int n) {
  nthreads = n;
  memset(&threadTimes, 0, sizeof threadTimes);
  if (loomCommInitAll(comms, n, NULL) != loomSuccess) {
    fprintf(stderr, "loomCommInitAll: %s\n", loomGetLastError(NULL));
    exit(1);
  }
  loomCommAbort(comms[n - 1]); /* the lost rank: it takes no part in anything after this */
  pthread_t threads[kMostRanks];
  pthread_barrier_init(&ready, NULL, (unsigned)(n - 1));
  for (int r = 0; r < n - 1; ++r) pthread_create(&threads[r], NULL, survivor, (void*)(long)r);
  for (int r = 0; r < n - 1; ++r) pthread_join(threads[r], NULL);
  pthread_barrier_destroy(&ready);
  for (int r = 0; r < n - 1; ++r) loomCommAbort(comms[r]);
  if (threadTimes.failed) exit(1);
  return span(&threadTimes, n - 1);
}

/* ---- rank processes ---- */
static double processesOnce(int n, struct Times* t) {
  memset(t, 0, sizeof *t);
  loomUniqueId id;
  if (loomGetUniqueId(&id) != loomSuccess) exit(1);
  pid_t pids[kMostRanks];
  for (int r = 0; r < n; ++r) {
    pids[r] = fork();
    if (pids[r] < 0) exit(1);
    if (pids[r] > 0) continue;
    loomComm_t comm = NULL;
    if (loomCommInitRank(&comm, n, id, r) != loomSuccess) _exit(1);
    int one = 1, sum = 0; /* everyone is up before the loss */
    if (loomAllReduce(&one, &sum, 1, loomInt32, loomSum, comm, NULL) != loomSuccess) _exit(1);
    if (r == n - 1) _exit(0); /* the lost rank: its process exits without a word */
    while (!t->lost) usleep(200);
    shrinkAndTime(comm, r, n - 1, t);
    loomCommAbort(comm);
    _exit(t->failed);
  }
  int status = 0, bad = 0;
  waitpid(pids[n - 1], &status, 0);
  bad |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  t->lost = 1;
  for (int r = 0; r < n - 1; ++r) {
    waitpid(pids[r], &status, 0);
    bad |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  }
  if (bad || t->failed) exit(1);
  return span(t, n - 1);
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "threads";
  int n = argc > 2 ? atoi(argv[2]) : 8, reps = argc > 3 ? atoi(argv[3]) : 10;
  int threads = strcmp(mode, "threads") == 0;
  if ((!threads && strcmp(mode, "processes") != 0) || n < 2 || n > kMostRanks || reps < 1) {
    fprintf(stderr, "usage: shrink_bench threads|processes [N, 2..%d] [R]\n", kMostRanks);
    return 2;
  }
  struct Times* shared = mmap(NULL, sizeof(struct Times), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) return 1;
  double* ms = malloc(sizeof(double) * (size_t)reps);
  for (int k = 0; k < reps; ++k) ms[k] = threads ? threadsOnce(n) : processesOnce(n, shared);
  qsort(ms, (size_t)reps, sizeof(double), byValue);
  printf("{\"mode\": \"%s\", \"ranks\": %d, \"lost\": 1, \"reps\": %d, \"median_ms\": %.2f, \"min_ms\": %.2f, \"max_ms\": %.2f}\n",
         mode, n, reps, ms[reps / 2], ms[0], ms[reps - 1]);
  free(ms);
  return 0;
}
