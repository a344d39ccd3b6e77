// A rank's segment: its doorbell, its liveness word and the FIFOs in which same-host peers deposit
// messages for it. Threads of one process share a heap segment by address; processes on one host map
// a POSIX shared-memory segment by name, unlinked as soon as every peer has mapped it so that nothing
// is left behind in /dev/shm even if a process dies.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "transport/doorbell.h"

namespace loom {

constexpr uint32_t kMaxFifoSlots = 16;

struct alignas(64) FifoControl {
  alignas(64) std::atomic<uint64_t> tail{0};  // messages posted (written by the sender)
  alignas(64) std::atomic<uint64_t> head{0};  // messages consumed (written by the receiver)
  alignas(64) uint64_t sizes[kMaxFifoSlots] = {0};
};

enum class SegmentState : uint32_t { Alive = 0, Failed = 1 };

struct SegmentHeader {
  Doorbell bell;
  alignas(64) std::atomic<uint32_t> state{0};
  int32_t pid = 0;
  char reason[256] = {0};  // why the owner failed, written before state becomes Failed
  int32_t waitsOn = -1;    // with it: the rank the owner gave up waiting for (a timeout), else -1
  // Where the owner's driving thread last waited on a peer: (steady-clock ns & ~0xffff) | CPU number.
  // A peer waiting on the owner from that same CPU, recently, shares its core (core/run/core_sharing.h).
  alignas(64) std::atomic<uint64_t> waitingCpu{0};
};

// Where everything lies inside a segment holding `nfifos` FIFOs of nslots x slotBytes.
struct SegmentLayout {
  size_t nfifos = 0;
  size_t nslots = 0;
  size_t slotBytes = 0;
  static constexpr size_t kHeaderBytes = 4096;
  static constexpr size_t kControlBytes = 4096;
  size_t fifoBytes() const { return kControlBytes + nslots * slotBytes; }
  size_t totalBytes() const { return kHeaderBytes + nfifos * fifoBytes(); }
  size_t controlOffset(size_t fifo) const { return kHeaderBytes + fifo * fifoBytes(); }
  size_t slotsOffset(size_t fifo) const { return controlOffset(fifo) + kControlBytes; }
};

class Segment {
 public:
  ~Segment();
  // A segment of `bytes`, in process memory or (shared) in POSIX shared memory.
  static Status create(size_t bytes, bool shared, std::shared_ptr<Segment>* out);
  // Maps a peer's shared segment by name.
  static Status open(const std::string& name, size_t bytes, std::shared_ptr<Segment>* out);

  char* base() const { return base_; }
  size_t bytes() const { return bytes_; }
  const std::string& name() const { return name_; }
  SegmentHeader* header() const { return reinterpret_cast<SegmentHeader*>(base_); }
  void unlinkName();

 private:
  char* base_ = nullptr;
  size_t bytes_ = 0;
  std::string name_;  // empty for process memory
  bool owner_ = false;
};

}  // namespace loom
