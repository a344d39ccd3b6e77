#include "core/observe/flight_record.h"

#include <algorithm>

#include "base/clock.h"
#include "base/datatype.h"
#include "core/observe/comm_state.h"

namespace loom {

void FlightRecord::issued(uint64_t seq, Collective coll, uint64_t count, loomDataType_t dtype, int peer, Runs runs) {
  Slot& s = slots_[seq % kEntries];
  const uint64_t v = s.version.load(std::memory_order_relaxed);
  s.version.store(v + 1, std::memory_order_relaxed);  // odd: a reader skips the slot
  std::atomic_thread_fence(std::memory_order_release);
  constexpr auto relaxed = std::memory_order_relaxed;
  s.seq.store(seq, relaxed);
  s.count.store(count, relaxed);
  s.issuedNs.store(static_cast<int64_t>(nowNs()), relaxed);
  s.peer.store(peer, relaxed);
  s.coll.store(static_cast<uint8_t>(coll), relaxed);
  s.dtype.store(static_cast<uint8_t>(dtype), relaxed);
  s.runs.store(static_cast<uint8_t>(runs), relaxed);
  s.version.store(v + 2, std::memory_order_release);
  waitingOn_.store(-1, relaxed);  // a new operation: whatever the last one waited on is history
  lastIssued_.store(seq, std::memory_order_release);
}

void FlightRecord::completedUpTo(uint64_t seq) {
  uint64_t cur = completedUpTo_.load(std::memory_order_relaxed);
  while (seq > cur && !completedUpTo_.compare_exchange_weak(cur, seq, std::memory_order_release)) {
  }
}

void FlightRecord::failed(const std::string& error) {
  std::lock_guard<std::mutex> lock(failureMutex_);
  if (failure_.empty()) failure_ = error;
}

void FlightRecord::snapshot(CommState* state, uint64_t deviceFirstUnfinished, int deviceWaitingOn) const {
  const uint64_t last = lastIssued_.load(std::memory_order_acquire);
  const uint64_t hostDone = completedUpTo_.load(std::memory_order_acquire);
  state->lastIssued = last;
  state->waitingOn = waitingOn_.load(std::memory_order_relaxed);
  if (state->waitingOn < 0) state->waitingOn = deviceWaitingOn;
  state->timedOut = timedOut_.load(std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(failureMutex_);
    state->failure = failure_;
  }
  state->entries.clear();
  const int64_t now = static_cast<int64_t>(nowNs());
  const uint64_t first = last >= kEntries ? last - kEntries + 1 : 1;
  // Complete up to the first operation in the window that is not (a host operation past hostDone, a
  // device one from deviceFirstUnfinished on), or up to hostDone when a host operation older than the
  // window is still running; the device's older ones ended (its launches end in order).
  uint64_t firstUnfinished = hostDone + 1 < first ? hostDone + 1 : 0;
  for (uint64_t seq = first; seq <= last; ++seq) {
    const Slot& s = slots_[seq % kEntries];
    const uint64_t before = s.version.load(std::memory_order_acquire);
    if (before & 1) continue;
    constexpr auto relaxed = std::memory_order_relaxed;
    const uint64_t slotSeq = s.seq.load(relaxed), count = s.count.load(relaxed);
    const int64_t issuedNs = s.issuedNs.load(relaxed);
    const int32_t peer = s.peer.load(relaxed);
    const uint8_t coll = s.coll.load(relaxed), dtype = s.dtype.load(relaxed), runs = s.runs.load(relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.version.load(std::memory_order_relaxed) != before || slotSeq != seq) continue;  // rewritten meanwhile
    state->entries.push_back({slotSeq, collectiveName(static_cast<Collective>(coll)), count,
                              dataTypeName(static_cast<loomDataType_t>(dtype)), peer, (now - issuedNs) / 1000});
    const bool running = static_cast<Runs>(runs) == Runs::OnDevice
                             ? deviceFirstUnfinished != 0 && seq >= deviceFirstUnfinished
                             : seq > hostDone;
    if (running && firstUnfinished == 0) firstUnfinished = seq;
  }
  state->completedUpTo = firstUnfinished != 0 ? firstUnfinished - 1 : std::max(last, hostDone);
}

}  // namespace loom
