// Two ranks that wait on each other from one core. The kernel sometimes starts two rank processes on
// one CPU and leaves them there while another CPU idles (seen on a 2-core VM: ranks that spin and
// yield look to the load balancer like tasks that hardly run). Then every hand-off costs the waiter's
// spin before it yields: an 8 B allreduce took 14.5 us per iteration instead of 0.5 us, in about one
// run of four. Spinning cannot help there: the peer runs only once this thread gives the core up.
//
// Each waiting thread publishes its CPU, stamped with the time, in its segment header; a thread that
// has waited on a memory peer for a microsecond compares the peer's recent stamp with its own CPU.
// On a match it gives way at once: it yields; and after a few such waits in a row, on a host with
// at least as many CPUs as ranks, the higher rank of the two moves itself to a CPU of its affinity
// mask that idled at least half of the last 10 ms (/proc/stat) and restores the mask at once (the kernel migrates a thread whose mask excludes its CPU; restoring the mask does not move it
// back). LOOM_IGNORE_CPU_AFFINITY=1 keeps Loom from touching affinity: then it only yields.
#pragma once

#include <cstdint>
#include <vector>

namespace loom {

class TransportSet;

class CoreSharing {
 public:
  // `mayMove`: this host has at least as many CPUs as ranks (else sharing a core is unavoidable) and
  // the user allows Loom to touch affinity.
  CoreSharing(const TransportSet* transports, bool mayMove);

  // Publishes this thread's CPU and tells whether `peer` (a memory peer) waited on the same CPU
  // within the last kRecentNs. False for other peers.
  bool sharesCpuWith(int peer, uint64_t now);
  // Lets `peer`, on this CPU, run by moving this thread away (see above): true when it moved. Else
  // the caller must leave the core itself (sleep). Of two ranks that share a core only the higher
  // moves: both moving at once would land them together again.
  bool giveWay(int peer, uint64_t now);
  // The waits since the last move in which the peer was on this CPU; reset when a wait ends normally.
  void waitEndedApart() { sharedWaits_ = 0; }

  // Whether the last look found the peer on this core: then the next wait looks at once, since a
  // spin cannot end before the peer runs.
  bool sharing() const { return sharedWaits_ > 0; }

 private:
  const TransportSet* transports_;
  bool mayMove_;
  int cpu_ = -1;
  uint32_t sharedWaits_ = 0;
  uint64_t lastMoveNs_ = 0;
  std::vector<uint64_t> idleSample_;  // each CPU's idle ticks at the last look (giveWay)
  std::vector<uint64_t> idleNow_;     // the look in progress; swapped with idleSample_ after it
  uint64_t idleSampleNs_ = 0;
};

}  // namespace loom
