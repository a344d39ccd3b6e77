// The words a stream gate (stream_gate.h) waits on. Only built with the CUDA feature; this header
// includes no CUDA header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/status.h"

namespace loom::cuda {

// Words for the gates of one communicator: one pinned, mapped, portable block, handed out one word
// at a time and taken back once the stream is past the gate. Not thread-safe (its owner locks).
class HostFlags {
 public:
  HostFlags() = default;
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
  static constexpr size_t kWords = 4096;
  uint32_t* block_ = nullptr;
  std::vector<size_t> free_;
};

}  // namespace loom::cuda
