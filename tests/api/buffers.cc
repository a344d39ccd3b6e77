#include "buffers.h"

#include <cstring>
#include <sstream>

#include "reference.h"

namespace loomtest {
namespace {

constexpr uint64_t kGuardSeed = 0x6775617264ull;  // "guard"
constexpr int kGuardRank = 1000;

}  // namespace

GuardedBuffer::GuardedBuffer(size_t bytes, uint64_t junkSeed)
    : bytes_(bytes), storage_(new uint8_t[bytes + 2 * kGuardBytes + 64]) {
  uintptr_t p = reinterpret_cast<uintptr_t>(storage_.get());
  base_ = storage_.get() + ((64 - (p & 63)) & 63);
  fillPattern(base_, kGuardBytes, kGuardSeed, kGuardRank, 0);
  fillPattern(base_ + kGuardBytes + bytes_, kGuardBytes, kGuardSeed, kGuardRank, kGuardBytes);
  fillPattern(data(), bytes_, junkSeed ^ 0x6A756E6Bull, kGuardRank + 1, 0);
}

std::string GuardedBuffer::checkGuards(const std::string& name) const {
  size_t bad = 0;
  size_t at = findPatternMismatch(base_, kGuardBytes, kGuardSeed, kGuardRank, 0, &bad);
  std::ostringstream os;
  if (at != SIZE_MAX) {
    os << name << ": " << bad << " byte(s) written before the buffer (first at offset -"
       << (kGuardBytes - at) << ")";
    return os.str();
  }
  at = findPatternMismatch(base_ + kGuardBytes + bytes_, kGuardBytes, kGuardSeed, kGuardRank, kGuardBytes,
                           &bad);
  if (at != SIZE_MAX) {
    os << name << ": " << bad << " byte(s) written after the buffer of " << bytes_
       << " bytes (first at end+" << at << ")";
    return os.str();
  }
  return "";
}

}  // namespace loomtest
