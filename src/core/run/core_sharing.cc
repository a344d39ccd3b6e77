#include "core/run/core_sharing.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <vector>

#include "base/log.h"
#include "transport/transport_set.h"

namespace loom {

namespace {

constexpr uint64_t kCpuMask = 0xffff;
// A peer's stamp counts this long: a peer on the same core waits at every hand-off, so a real
// sharing is restamped every few microseconds; an older stamp may be from before a migration.
constexpr uint64_t kRecentNs = 200'000;
constexpr uint32_t kSharedWaitsBeforeMove = 4;     // a single coincidence is no pattern
constexpr uint64_t kMinMoveIntervalNs = 10'000'000;  // never thrash between CPUs

// Threads runnable on the whole machine now (/proc/loadavg's "running/total"), or -1.
int runnableThreads() {
  FILE* f = std::fopen("/proc/loadavg", "r");
  if (!f) return -1;
  double avg1, avg5, avg15;
  int running = -1, total = 0;
  if (std::fscanf(f, "%lf %lf %lf %d/%d", &avg1, &avg5, &avg15, &running, &total) != 5) running = -1;
  std::fclose(f);
  return running;
}

// Each CPU's idle time so far (/proc/stat's idle + iowait, in clock ticks), indexed by CPU number,
// into `idle` (emptied first; left empty when /proc/stat cannot be read). Filled in place: its
// capacity, reserved for every configured CPU, is kept, so a look allocates nothing.
void readIdleTicksByCpu(std::vector<uint64_t>& idle) {
  idle.clear();
  FILE* f = std::fopen("/proc/stat", "r");
  if (!f) return;
  char line[512];
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, "cpu", 3) != 0 || !std::isdigit(static_cast<unsigned char>(line[3])))
      continue;  // not a CPU's line, or the machine's total ("cpu  ...")
    int cpu = -1;
    unsigned long long user, nice, system, idleTicks, iowait;
    if (std::sscanf(line, "cpu%d %llu %llu %llu %llu %llu", &cpu, &user, &nice, &system, &idleTicks, &iowait) != 6 ||
        cpu < 0)
      continue;
    if (idle.size() <= static_cast<size_t>(cpu)) idle.resize(static_cast<size_t>(cpu) + 1, 0);
    idle[static_cast<size_t>(cpu)] = idleTicks + iowait;
  }
  std::fclose(f);
}

}  // namespace

CoreSharing::CoreSharing(const TransportSet* transports, bool mayMove) : transports_(transports), mayMove_(mayMove) {
  // A blocking operation allocates nothing once warm (tests/core/allocation_test.cc); the looks at
  // /proc/stat in giveWay come during operations, so their two samples get their room now.
  const long cpus = sysconf(_SC_NPROCESSORS_CONF);
  if (mayMove_ && cpus > 0) {
    idleSample_.reserve(static_cast<size_t>(cpus));
    idleNow_.reserve(static_cast<size_t>(cpus));
  }
}

bool CoreSharing::sharesCpuWith(int peer, uint64_t now) {
  if (peer < 0) return false;
  const int cpu = sched_getcpu();
  if (cpu < 0) return false;
  cpu_ = cpu;
  transports_->publishWaitingCpu((now & ~kCpuMask) | static_cast<uint64_t>(cpu));
  const uint64_t theirs = transports_->peerWaitingCpu(peer);
  if (theirs == 0 || (theirs & kCpuMask) != static_cast<uint64_t>(cpu)) return false;
  const uint64_t stamped = theirs & ~kCpuMask;
  return now >= stamped ? now - stamped < kRecentNs : true;
}

bool CoreSharing::giveWay(int peer, uint64_t now) {
  ++sharedWaits_;
  if (!mayMove_ || transports_->rank() < peer || sharedWaits_ < kSharedWaitsBeforeMove ||
      now - lastMoveNs_ < kMinMoveIntervalNs || cpu_ < 0)
    return false;
  lastMoveNs_ = now;
  sharedWaits_ = 0;
  cpu_set_t allowed;
  if (pthread_getaffinity_np(pthread_self(), sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) < 2 ||
      !CPU_ISSET(cpu_, &allowed))
    return false;
  // Only onto a free core: when other work fills the machine the other CPUs are busy, and a rank
  // moved there would wait for that work's time slices (milliseconds) instead of handing the core back
  // and forth with its peer (microseconds). A CPU counts as free when it idled at least half the time
  // since the last look (10 ms or more ago); at the first look, when the machine runs no more threads
  // than it has CPUs, plus one.
  readIdleTicksByCpu(idleNow_);
  const std::vector<uint64_t>& idleNow = idleNow_;
  const uint64_t elapsedNs = now - idleSampleNs_;
  const bool baseline = idleSample_.empty() || idleNow.size() != idleSample_.size();
  int target = -1;
  if (baseline) {
    // No history yet: a machine with no more runnable threads than CPUs, besides this one, has a free
    // CPU now (the /proc/stat test needs 10 ms of history; a job should not wait that long at start).
    const int runnable = runnableThreads();
    if (runnable >= 0 && runnable <= CPU_COUNT(&allowed) + 1)
      for (int c = 0; c < CPU_SETSIZE && target < 0; ++c)
        if (c != cpu_ && CPU_ISSET(c, &allowed)) target = c;
  } else {
    const double ticksPerNs = static_cast<double>(sysconf(_SC_CLK_TCK)) / 1e9;
    for (size_t c = 0; c < idleNow.size() && target < 0; ++c)
      if (static_cast<int>(c) != cpu_ && CPU_ISSET(c, &allowed) &&
          static_cast<double>(idleNow[c] - idleSample_[c]) >= 0.5 * ticksPerNs * static_cast<double>(elapsedNs))
        target = static_cast<int>(c);
  }
  idleSample_.swap(idleNow_);  // both keep their capacity
  idleSampleNs_ = now;
  if (target < 0) return false;
  cpu_set_t elsewhere;
  CPU_ZERO(&elsewhere);
  CPU_SET(target, &elsewhere);
  if (pthread_setaffinity_np(pthread_self(), sizeof elsewhere, &elsewhere) != 0) return false;
  pthread_setaffinity_np(pthread_self(), sizeof allowed, &allowed);
  LOOM_TRACE(Init, "a peer waited on this thread from CPU {}: moved to CPU {}", cpu_, sched_getcpu());
  return true;
}

}  // namespace loom
