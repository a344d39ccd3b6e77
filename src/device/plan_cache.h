// Encoded plan sequences kept in device memory by shape, so that a call of a shape seen before copies
// nothing to the GPU: its launch passes only its call (buffers, operator, lane statuses) as the
// kernel's parameter (kernels/cuda/device_plan_layout.h's DeviceLaunchArgs). A shape is, for each plan
// of the launch in order: the plan itself (core's plan cache hands out the same Plan for the same
// operation shape; the entry keeps it alive), its dtype, channels and direct-mode buffers, and which of
// its buffers are null or overlap which (the encoder's checks hold for every call alike so). One cache
// per communicator, least recently used out beyond kCapacity entries. Not thread-safe (the
// communicator's lock).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "algorithms/plan.h"
#include "loom.h"

namespace loom::device {

// One plan's part of a launch's shape.
struct PlanShapeKey {
  const Plan* plan = nullptr;
  loomDataType_t dtype = loomUint8;
  uint32_t nchannels = 0;
  std::vector<uint8_t> direct;   // by buffer index: a sender may write into it directly
  std::vector<int64_t> aliases;  // null buffers (index, -1) and overlapping pairs (i, j, j's address - i's)
  bool operator<(const PlanShapeKey& o) const;
  bool operator==(const PlanShapeKey& o) const;
};

// The shape part of `buffers` (by plan buffer index, with each buffer's bytes in `extents`), into
// *out (its capacity kept: a launch of a shape seen before allocates nothing).
void bufferAliases(const std::vector<char*>& buffers, std::span<const size_t> extents, std::vector<int64_t>* out);

class PlanCache {
 public:
  static constexpr size_t kCapacity = 256;

  struct Entry {
    char* sequence = nullptr;  // device memory (launchPool's), the launch's DevicePlanSequence
    std::vector<std::shared_ptr<const Plan>> plans;  // kept alive while their address is a key
  };

  // The entry of `key`, or null; a hit becomes the most recently used.
  const Entry* find(const std::vector<PlanShapeKey>& key);
  // Adds `entry` under `key`; an entry pushed out beyond kCapacity has its device memory appended to
  // *evicted, for the caller to free in stream order behind the launches that used it.
  void insert(std::vector<PlanShapeKey> key, Entry entry, std::vector<char*>* evicted);
  // Every entry's device memory (the communicator goes).
  std::vector<char*> takeAll();

 private:
  using Key = std::vector<PlanShapeKey>;
  std::map<Key, std::pair<Entry, std::list<const Key*>::iterator>> entries_;
  std::list<const Key*> recency_;  // most recently used first
};

}  // namespace loom::device
