#include "core/core_sharing.h"

#include <pthread.h>
#include <sched.h>

#include "base/clock.h"
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

}  // namespace

bool CoreSharing::sharesCpuWith(int peer) {
  if (peer < 0) return false;
  const int cpu = sched_getcpu();
  if (cpu < 0) return false;
  cpu_ = cpu;
  const uint64_t now = nowNs();
  transports_->publishWaitingCpu((now & ~kCpuMask) | static_cast<uint64_t>(cpu));
  const uint64_t theirs = transports_->peerWaitingCpu(peer);
  if (theirs == 0 || (theirs & kCpuMask) != static_cast<uint64_t>(cpu)) return false;
  const uint64_t stamped = theirs & ~kCpuMask;
  return now >= stamped ? now - stamped < kRecentNs : true;
}

void CoreSharing::giveWay(int peer) {
  ++sharedWaits_;
  const uint64_t now = nowNs();
  if (!mayMove_ || transports_->rank() < peer || sharedWaits_ < kSharedWaitsBeforeMove ||
      now - lastMoveNs_ < kMinMoveIntervalNs || cpu_ < 0) {
    sched_yield();
    return;
  }
  lastMoveNs_ = now;
  sharedWaits_ = 0;
  cpu_set_t allowed;
  if (pthread_getaffinity_np(pthread_self(), sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) < 2 ||
      !CPU_ISSET(cpu_, &allowed)) {
    sched_yield();
    return;
  }
  cpu_set_t elsewhere = allowed;
  CPU_CLR(cpu_, &elsewhere);
  if (pthread_setaffinity_np(pthread_self(), sizeof elsewhere, &elsewhere) == 0) {
    pthread_setaffinity_np(pthread_self(), sizeof allowed, &allowed);
    ++moves_;
    LOOM_TRACE(Init, "a peer waited on this thread from CPU {}: moved to CPU {}", cpu_, sched_getcpu());
  } else {
    sched_yield();
  }
}

}  // namespace loom
