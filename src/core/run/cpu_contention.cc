#include "core/run/cpu_contention.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

namespace loom {

namespace {

struct LoadFile {
  // Opened once and never closed: a descriptor per process, read with pread by any thread.
  int fd = ::open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
};

}  // namespace

bool cpusOversubscribed() {
  static const LoadFile file;
  if (file.fd < 0 || file.cpus <= 0) return false;
  char text[128];
  const ssize_t n = ::pread(file.fd, text, sizeof text - 1, 0);
  if (n <= 0) return false;
  text[n] = '\0';
  double load1, load5, load15;
  long running = 0, total = 0;
  if (std::sscanf(text, "%lf %lf %lf %ld/%ld", &load1, &load5, &load15, &running, &total) != 5) return false;
  return running > file.cpus;
}

}  // namespace loom
