// The words a stream gate (stream_gate.h) waits on. CUDA builds only; this header
// includes no CUDA header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/status.h"

namespace loom::device {

// Words for the gates of one communicator (or its plan kernels' abort word): one pinned, mapped,
// portable block of `words` words, handed out one at a time and taken back once the stream is past the
// gate. Not thread-safe (its owner locks).
class HostFlags {
 public:
  explicit HostFlags(size_t words = kGateWords) : words_(words) {}
  ~HostFlags();
  HostFlags(const HostFlags&) = delete;
  HostFlags& operator=(const HostFlags&) = delete;

  struct Flag {
    volatile uint32_t* host = nullptr;    // what the host writes
    volatile uint32_t* device = nullptr;  // what the stream reads
    size_t index = 0;
  };
  // A word set to 0 (held), or loomSystemError when every word is in use.
  Status acquire(Flag* out);
  void release(const Flag& flag);
  // Releases the stream waiting on the word.
  static void open(const Flag& flag);

 private:
  static constexpr size_t kGateWords = 4096;  // stream-ordered operations in flight on one communicator
  size_t words_;
  uint32_t* block_ = nullptr;
  std::vector<size_t> free_;
};

}  // namespace loom::device
