// FNV-1a, 64 bits: the one hash for fingerprints, cache keys and ids (fast, stable across runs and
// machines, not for security: a job's secret is random, its key only names it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace loom {

class Fnv1a {
 public:
  static constexpr uint64_t kOffsetBasis = 14695981039346656037ull;  // 0xcbf29ce484222325
  static constexpr uint64_t kPrime = 1099511628211ull;                // 0x100000001b3

  // A seed is folded into the offset basis: hashes of one text with different seeds differ.
  constexpr explicit Fnv1a(uint64_t seed = 0) : hash_(kOffsetBasis ^ seed) {}

  Fnv1a& bytes(const void* data, size_t count) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < count; ++i) hash_ = (hash_ ^ p[i]) * kPrime;
    return *this;
  }
  Fnv1a& text(std::string_view s) { return bytes(s.data(), s.size()); }
  // The value's bytes as they are in memory (an integer, an enum, a struct without padding).
  template <class T>
  Fnv1a& value(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    return bytes(&v, sizeof v);
  }
  // A text as its length, then its bytes: ("ab", "c") and ("a", "bc") hash apart.
  Fnv1a& field(std::string_view s) { return value(s.size()).text(s); }

  constexpr uint64_t digest() const { return hash_; }

 private:
  uint64_t hash_;
};

}  // namespace loom
