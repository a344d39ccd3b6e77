// A host buffer with guard bytes on both sides, so a collective that writes outside the region it
// was given is caught. The guards hold a pattern (not a constant) that no collective produces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace loomtest {

class GuardedBuffer {
 public:
  static constexpr size_t kGuardBytes = 256;

  // The data region is filled with junk that depends on junkSeed (never the expected result).
  explicit GuardedBuffer(size_t bytes, uint64_t junkSeed = 0);

  uint8_t* data() { return base_ + kGuardBytes; }
  const uint8_t* data() const { return base_ + kGuardBytes; }
  size_t size() const { return bytes_; }

  // "" when both guards are intact, else which side and the first changed offset.
  std::string checkGuards(const std::string& name) const;

 private:
  size_t bytes_;
  std::unique_ptr<uint8_t[]> storage_;
  uint8_t* base_;  // 64-byte aligned start of the front guard
};

}  // namespace loomtest
