#include "fake_counters.h"

#include <atomic>
#include <chrono>
#include <mutex>

namespace fakecuda {
namespace {

struct Counters {
  std::atomic<uint64_t> allocations{0}, frees{0}, deviceSynchronizations{0}, hostToDeviceCopies{0}, hostWaits{0};
};

Counters& counters() {
  static Counters* c = new Counters;  // never destroyed: stream threads may count during static destruction
  return *c;
}

struct EntryRegistry {
  std::mutex mutex;
  std::vector<EntryCounter*> entries;
};

EntryRegistry& entryRegistry() {
  static EntryRegistry* r = new EntryRegistry;  // never destroyed, as above
  return *r;
}

thread_local int tlsEntryDepth = 0;
thread_local uint64_t tlsFakeNs = 0;

uint64_t entryClockNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

}  // namespace

CallCounts callCounts() {
  Counters& c = counters();
  return {c.allocations.load(), c.frees.load(), c.deviceSynchronizations.load(), c.hostToDeviceCopies.load(),
          c.hostWaits.load()};
}

EntryCounter::EntryCounter(const char* name) : name_(name) {
  EntryRegistry& r = entryRegistry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.entries.push_back(this);
}

void EntryCounter::bump() { calls_.fetch_add(1, std::memory_order_relaxed); }
uint64_t EntryCounter::calls() const { return calls_.load(std::memory_order_relaxed); }
void EntryCounter::reset() { calls_.store(0, std::memory_order_relaxed); }

EntryGuard::EntryGuard(EntryCounter& counter) {
  outermost_ = tlsEntryDepth++ == 0;
  if (!outermost_) return;  // called by another of FakeCuda's functions: not the caller's call
  counter.bump();
  startNs_ = entryClockNs();
}

EntryGuard::~EntryGuard() {
  --tlsEntryDepth;
  if (outermost_) tlsFakeNs += entryClockNs() - startNs_;
}

std::vector<EntryCount> entryCounts() {
  EntryRegistry& r = entryRegistry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<EntryCount> out;
  for (const EntryCounter* e : r.entries)
    if (const uint64_t calls = e->calls(); calls > 0) out.push_back({e->name(), calls});
  return out;
}

bool insideFakeCuda() { return tlsEntryDepth > 0; }
uint64_t threadFakeCudaNs() { return tlsFakeNs; }

void resetCallCounts() {
  {
    EntryRegistry& r = entryRegistry();
    std::lock_guard<std::mutex> lock(r.mutex);
    for (EntryCounter* e : r.entries) e->reset();
  }
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
