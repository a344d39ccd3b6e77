// What FakeCuda counts of the calls made to it, for tests that assert what a code path does not do:
// allocate or free memory (device, pinned, managed, stream-ordered), make the host wait for a whole
// device (an implicit or explicit device synchronization, the legacy stream's synchronous copies), or
// copy host memory to the device (an encoded plan's upload). Process-wide; reset between phases.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

namespace fakecuda {

struct CallCounts {
  uint64_t allocations = 0;
  uint64_t frees = 0;
  uint64_t deviceSynchronizations = 0;
  uint64_t hostToDeviceCopies = 0;
  uint64_t hostWaits = 0;  // cudaStreamSynchronize, cudaEventSynchronize: the host waits for one stream
};

CallCounts callCounts();
void resetCallCounts();

// Per entry point: each function of the fake runtime and of the kernels' host API that Loom calls
// counts itself on entry (FAKECUDA_ENTRY), unless another of them called it; the calling thread's time
// inside them is summed too, so that a benchmark can take FakeCuda's own cost out of what it times
// (perf/launch_cost). resetCallCounts() zeroes the counts as well.
struct EntryCount {
  const char* name;
  uint64_t calls;
};
std::vector<EntryCount> entryCounts();  // the entry points called since the last reset, by name
// Whether this thread is inside one of FakeCuda's functions now (its own allocations, say, are not the
// caller's), and the nanoseconds it spent inside them so far.
bool insideFakeCuda();
uint64_t threadFakeCudaNs();

class EntryCounter {
 public:
  explicit EntryCounter(const char* name);  // registers itself (once per entry point)
  void bump();
  const char* name() const { return name_; }
  uint64_t calls() const;
  void reset();

 private:
  const char* name_;
  std::atomic<uint64_t> calls_{0};
};

class EntryGuard {
 public:
  explicit EntryGuard(EntryCounter& counter);
  ~EntryGuard();
  EntryGuard(const EntryGuard&) = delete;
  EntryGuard& operator=(const EntryGuard&) = delete;

 private:
  uint64_t startNs_ = 0;
  bool outermost_ = false;
};

#define FAKECUDA_ENTRY_NAMED(name)                                 \
  static ::fakecuda::EntryCounter fakecuda_entry_counter_(name); \
  ::fakecuda::EntryGuard fakecuda_entry_guard_(fakecuda_entry_counter_)
#define FAKECUDA_ENTRY() FAKECUDA_ENTRY_NAMED(__func__)

// For the runtime's own files.
void countAllocation();
void countFree();
void countDeviceSynchronization();
void countHostToDeviceCopy();
void countHostWait();

}  // namespace fakecuda
