// Built plans, per communicator, keyed by everything a plan depends on. Training loops repeat the
// same few operations; rebuilding their plans would cost more than moving a small message.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>

#include "algorithms/builders.h"

namespace loom {

struct PlanKey {
  Collective coll;
  Algorithm algo;
  int root;
  uint64_t count;
  size_t elemSize;
  uint64_t chunkElems;
  int nchannels;  // for a point-to-point plan, the channel it uses
  uint8_t p2pDirection = 0;  // a point-to-point plan of one operation: 1 a send, 2 a receive
  bool operator==(const PlanKey&) const = default;
};

struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const {
    uint64_t h = k.count * 0x9E3779B97F4A7C15ull;
    h ^= (static_cast<uint64_t>(k.coll) << 56) ^ (static_cast<uint64_t>(k.algo) << 48) ^
         (static_cast<uint64_t>(k.root) << 24) ^ (k.elemSize << 16) ^ static_cast<uint64_t>(k.nchannels) ^
         (static_cast<uint64_t>(k.p2pDirection) << 8);
    return static_cast<size_t>(h ^ (k.chunkElems * 0xC2B2AE3D27D4EB4Full));
  }
};

class PlanCache {
 public:
  std::shared_ptr<const Plan> find(const PlanKey& key) const {
    auto it = plans_.find(key);
    return it == plans_.end() ? nullptr : it->second;
  }
  void insert(const PlanKey& key, std::shared_ptr<const Plan> plan) {
    if (plans_.size() >= kMaxPlans) plans_.clear();  // simple bound: workloads reuse a handful
    plans_.emplace(key, std::move(plan));
  }

 private:
  static constexpr size_t kMaxPlans = 512;
  std::unordered_map<PlanKey, std::shared_ptr<const Plan>, PlanKeyHash> plans_;
};

}  // namespace loom
