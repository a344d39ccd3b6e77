/* The floor under a 2-rank allreduce of 8 bytes over TCP (perf/net_compare): both sides send 16 bytes
 * and spin until the other's arrive, over one connection used both ways (how MPICH's UCX connects a
 * pair) or over two one-way connections (ncclNet's model, which Loom's socket provider follows), the
 * latter with delayed acknowledgements as Loom sets them. Prints one JSON line (the server side).
 *
 * usage: tcp_exchange server|client ADDRESS PORT one|two [ITERATIONS] */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: tcp_exchange server|client ADDRESS PORT one|two [ITERATIONS]\n");
    return 2;
  }
  const int server = !strcmp(argv[1], "server"), two = !strcmp(argv[4], "two");
  const int iters = argc > 5 ? atoi(argv[5]) : 20000, warmup = iters / 10;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((unsigned short)atoi(argv[3]));
  inet_pton(AF_INET, argv[2], &a.sin_addr);
  int out = -1, in = -1;
  const int nconn = two ? 2 : 1;
  int fds[2] = {-1, -1};
  if (server) {
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(l, (struct sockaddr*)&a, sizeof a) || listen(l, 4)) return perror("listen"), 1;
    for (int i = 0; i < nconn; ++i) fds[i] = accept(l, 0, 0);
    close(l);
  } else {
    for (int i = 0; i < nconn; ++i) {
      fds[i] = socket(AF_INET, SOCK_STREAM, 0);
      while (connect(fds[i], (struct sockaddr*)&a, sizeof a)) usleep(10000);
    }
  }
  /* Connection 0 carries client -> server, connection 1 (when there are two) server -> client. */
  out = server ? fds[nconn - 1] : fds[0];
  in = server ? fds[0] : fds[nconn - 1];
  nodelay(out);
  nodelay(in);
  char buf[16] = {0}, got[16];
  double start = 0;
  for (int i = 0; i < iters + warmup; ++i) {
    if (i == warmup) start = now();
    send(out, buf, sizeof buf, MSG_DONTWAIT);
    size_t have = 0;
    while (have < sizeof got) {
      ssize_t r = recv(in, got + have, sizeof got - have, MSG_DONTWAIT);
      if (r > 0) have += (size_t)r;
      if (r == 0) return fprintf(stderr, "peer closed\n"), 1;
    }
    if (two) {
      int quick = 0;
      setsockopt(in, IPPROTO_TCP, TCP_QUICKACK, &quick, sizeof quick);
    }
  }
  if (server)
    printf("{\"library\":\"tcp %s connection%s\",\"time_us\":%.3f}\n", two ? "two" : "one", two ? "s" : "",
           (now() - start) / iters * 1e6);
  return 0;
}
