// A per-rank wake-up word in (possibly shared) memory: peers ring it when they deliver a message to
// this rank or free space this rank waits for. The owner spins briefly, then sleeps on it with a
// futex, so ranks that outnumber the cores leave the processors to the ranks that can progress.
#pragma once

#include <atomic>
#include <cstdint>

namespace loom {

struct alignas(64) Doorbell {
  std::atomic<uint32_t> seq{0};
  char pad0[60];
  std::atomic<uint32_t> sleepers{0};
  char pad1[60];
};

// Wakes the owner if it sleeps. Call after publishing the data the owner waits for: the fence orders
// that publication before the look at `sleepers`, so the common case (owner awake) costs no write.
void ringDoorbell(Doorbell* bell);

// The owner's side, in three steps: announce (the owner must then look for work once more), then
// either sleep (nothing found) or leave (work found). Sleeping returns on a ring, a signal or
// timeoutUs; a ring that came between announce and sleep is not lost (the futex compares seq).
uint32_t announceSleep(Doorbell* bell);
void sleepAnnounced(Doorbell* bell, uint32_t seen, int64_t timeoutUs);
void cancelSleep(Doorbell* bell);

}  // namespace loom
