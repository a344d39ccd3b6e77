#include "device/plan_cache.h"

#include <tuple>

namespace loom::device {

bool PlanShapeKey::operator<(const PlanShapeKey& o) const {
  return std::tie(plan, dtype, nchannels, direct, aliases) < std::tie(o.plan, o.dtype, o.nchannels, o.direct, o.aliases);
}

bool PlanShapeKey::operator==(const PlanShapeKey& o) const {
  return std::tie(plan, dtype, nchannels, direct, aliases) == std::tie(o.plan, o.dtype, o.nchannels, o.direct, o.aliases);
}

void bufferAliases(const std::vector<char*>& buffers, std::span<const size_t> extents, std::vector<int64_t>* into) {
  std::vector<int64_t>& out = *into;
  out.clear();
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (!buffers[i]) {
      out.insert(out.end(), {static_cast<int64_t>(i), -1});
      continue;
    }
    for (size_t j = i + 1; j < buffers.size(); ++j) {
      if (!buffers[j]) continue;
      const auto a = reinterpret_cast<uintptr_t>(buffers[i]), b = reinterpret_cast<uintptr_t>(buffers[j]);
      const size_t ea = i < extents.size() ? extents[i] : 0, eb = j < extents.size() ? extents[j] : 0;
      // Equal addresses count as overlapping even when a buffer is empty (an in-place layout).
      if (a == b || (a < b + eb && b < a + ea))
        out.insert(out.end(), {static_cast<int64_t>(i), static_cast<int64_t>(j), static_cast<int64_t>(b - a)});
    }
  }
}

const PlanCache::Entry* PlanCache::find(const std::vector<PlanShapeKey>& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return nullptr;
  recency_.splice(recency_.begin(), recency_, it->second.second);
  return &it->second.first;
}

void PlanCache::insert(std::vector<PlanShapeKey> key, Entry entry, std::vector<char*>* evicted) {
  auto [it, added] = entries_.try_emplace(std::move(key));
  if (!added) {  // raced by nobody (the communicator's lock), but keep the newer encoding
    evicted->push_back(it->second.first.sequence);
    it->second.first = std::move(entry);
    recency_.splice(recency_.begin(), recency_, it->second.second);
    return;
  }
  it->second.first = std::move(entry);
  recency_.push_front(&it->first);
  it->second.second = recency_.begin();
  while (entries_.size() > kCapacity) {
    auto last = entries_.find(*recency_.back());
    evicted->push_back(last->second.first.sequence);
    recency_.pop_back();
    entries_.erase(last);
  }
}

std::vector<char*> PlanCache::takeAll() {
  std::vector<char*> all;
  for (auto& [key, value] : entries_) all.push_back(value.first.sequence);
  entries_.clear();
  recency_.clear();
  return all;
}

}  // namespace loom::device
