#include "fake_counters.h"

#include <atomic>

namespace fakecuda {
namespace {

struct Counters {
  std::atomic<uint64_t> allocations{0}, frees{0}, deviceSynchronizations{0}, hostToDeviceCopies{0}, hostWaits{0};
};

Counters& counters() {
  static Counters* c = new Counters;  // never destroyed: stream threads may count during static destruction
  return *c;
}

}  // namespace

CallCounts callCounts() {
  Counters& c = counters();
  return {c.allocations.load(), c.frees.load(), c.deviceSynchronizations.load(), c.hostToDeviceCopies.load(),
          c.hostWaits.load()};
}

void resetCallCounts() {
  Counters& c = counters();
  c.allocations = 0;
  c.frees = 0;
  c.deviceSynchronizations = 0;
  c.hostToDeviceCopies = 0;
  c.hostWaits = 0;
}

void countAllocation() { ++counters().allocations; }
void countFree() { ++counters().frees; }
void countDeviceSynchronization() { ++counters().deviceSynchronizations; }
void countHostToDeviceCopy() { ++counters().hostToDeviceCopies; }
void countHostWait() { ++counters().hostWaits; }

}  // namespace fakecuda
