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

void ringDoorbell(Doorbell* bell);
// Sleeps while bell->seq == seen, for at most timeoutUs; returns early on a ring or a signal.
void sleepOnDoorbell(Doorbell* bell, uint32_t seen, int64_t timeoutUs);

}  // namespace loom
