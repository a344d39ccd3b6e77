/* The physical limit for host collectives: single-thread memcpy bandwidth, from DRAM (64 MiB) and
 * in cache (256 KiB). Prints JSON: {"dram_gbs": X, "cache_gbs": Y}. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static double measure(size_t bytes, double seconds) {
  char* a = malloc(bytes);
  char* b = malloc(bytes);
  memset(a, 1, bytes);
  memset(b, 2, bytes);
  double best = 0;
  for (int round = 0; round < 5; ++round) {
    size_t moved = 0;
    double t0 = now(), t;
    do {
      memcpy(b, a, bytes);
      moved += bytes;
      a[moved % bytes] ^= 1; /* keeps the compiler from dropping copies */
    } while ((t = now()) - t0 < seconds / 5);
    double gbs = moved / (t - t0) / 1e9;
    if (gbs > best) best = gbs;
  }
  free(a);
  free(b);
  return best;
}

int main(void) {
  printf("{\"dram_gbs\": %.2f, \"cache_gbs\": %.2f}\n", measure(64u << 20, 1.0), measure(256u << 10, 0.5));
  return 0;
}
