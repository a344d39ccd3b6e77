// A communicator's flight record: the last kEntries operations this rank issued (sequence number,
// collective, count, datatype, root or peer, when, and whether the host or a plan kernel runs it), how
// far they completed, the peer its current wait is on (noted by the driving thread's health check, so
// only waits that last; for a plan kernel, by its lanes), whether its own wait timed out, and the
// error that broke the communicator. Host operations complete in order (completedUpTo); plan kernels'
// launches end in order on the device, which the reader asks (snapshot's device arguments). Written on the operation path with a few plain
// stores (no lock, no allocation); read from any thread at any time, also while the rank is wedged in
// an operation (a slot being rewritten is skipped), into the rank's CommState
// (core/observe/comm_state.h) for a dump (loomCommDumpState) and for the job-wide hang report
// (core/observe/hang_report.h), which lines up every rank's record.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "algorithms/plan.h"
#include "loom.h"

namespace loom {

struct CommState;

class FlightRecord {
 public:
  static constexpr int kEntries = 64;
  enum class Runs : uint8_t { OnHost, OnDevice };

  // Operation `seq` was issued (under the communicator's `busy`, so one writer issues at a time).
  void issued(uint64_t seq, Collective coll, uint64_t count, loomDataType_t dtype, int peer, Runs runs = Runs::OnHost);
  // Every host operation up to `seq` completed (by whichever thread completes them, in order).
  void completedUpTo(uint64_t seq);
  // The error that broke the communicator (the first is kept).
  void failed(const std::string& error);
  // The operation in flight has waited a while on rank `peer` (-1: on none in particular).
  void waitingOn(int peer) { waitingOn_.store(peer, std::memory_order_relaxed); }
  // This rank's own wait ran past the timeout (not a peer's notice): it then logs the job's hang report.
  void markTimedOut() { timedOut_.store(true, std::memory_order_relaxed); }
  bool timedOut() const { return timedOut_.load(std::memory_order_relaxed); }

  // Fills the record's part of *state (counters, wait, failure, entries oldest first); callable from
  // any thread. The device's side (device/device_layer.h's DeviceProgress): the first operation run on
  // the device whose launch has not ended (0: none), and whom its lanes wait on (-1: nobody). The state's
  // completedUpTo is then the operation before the first one, of either kind, not yet complete.
  void snapshot(CommState* state, uint64_t deviceFirstUnfinished = 0, int deviceWaitingOn = -1) const;

 private:
  // A seqlock: fields are relaxed atomics (plain stores on x86 and Arm), so a reader racing a writer
  // reads no torn field and the version tells it to drop the slot.
  struct Slot {
    std::atomic<uint64_t> version{0};  // odd while being written
    std::atomic<uint64_t> seq{0};
    std::atomic<uint64_t> count{0};
    std::atomic<int64_t> issuedNs{0};
    std::atomic<int32_t> peer{-1};
    std::atomic<uint8_t> coll{0};
    std::atomic<uint8_t> dtype{0};
    std::atomic<uint8_t> runs{0};  // Runs
  };
  Slot slots_[kEntries];
  std::atomic<uint64_t> lastIssued_{0};
  std::atomic<uint64_t> completedUpTo_{0};
  std::atomic<int32_t> waitingOn_{-1};
  std::atomic<bool> timedOut_{false};
  mutable std::mutex failureMutex_;  // never taken on the operation path
  std::string failure_;
};

}  // namespace loom
