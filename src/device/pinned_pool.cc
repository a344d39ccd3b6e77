#include "device/pinned_pool.h"

#include <cuda_runtime_api.h>

#include <bit>
#include <map>
#include <mutex>

#include "base/settings.h"
#include "device/memory_kind.h"

namespace loom::device {
namespace {

constexpr size_t kMinBlock = size_t{64} << 10;
constexpr size_t kLargestReuse = 16;  // a cached block serves requests down to 1/16 of its size

struct Pool {
  std::mutex mutex;
  std::multimap<size_t, char*> free;  // capacity -> block
  size_t cachedBytes = 0;
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: blocks may be released during static destruction
  return *p;
}

size_t sizeClass(size_t bytes) { return std::bit_ceil(bytes < kMinBlock ? kMinBlock : bytes); }

}  // namespace

PinnedBlock& PinnedBlock::operator=(PinnedBlock&& other) noexcept {
  if (this != &other) {
    release();
    data_ = other.data_;
    capacity_ = other.capacity_;
    other.data_ = nullptr;
    other.capacity_ = 0;
  }
  return *this;
}

Status PinnedBlock::acquire(size_t bytes) {
  const size_t want = sizeClass(bytes);
  if (data_ && capacity_ >= want) return Status::Ok();
  release();
  {
    Pool& p = pool();
    std::lock_guard<std::mutex> lock(p.mutex);
    // The smallest cached block that holds the request, unless it is much larger: a block warmed at
    // setup then serves the first launches (a fresh cudaHostAlloc there could synchronize with a
    // peer's kernel that already waits), and a huge block is not tied up by a small request.
    auto it = p.free.lower_bound(want);
    if (it != p.free.end() && it->first <= want * kLargestReuse) {
      data_ = it->second;
      capacity_ = it->first;
      p.cachedBytes -= capacity_;
      p.free.erase(it);
      return Status::Ok();
    }
  }
  void* ptr = nullptr;
  cudaError_t err = cudaHostAlloc(&ptr, want, cudaHostAllocPortable);
  if (err != cudaSuccess) {
    // Cached blocks of other sizes may be what stands in the way: drop them and try once more.
    cudaGetLastError();
    trimPinnedPool();
    err = cudaHostAlloc(&ptr, want, cudaHostAllocPortable);
  }
  if (err != cudaSuccess) return cudaStatus(err, "cudaHostAlloc (pinned staging buffer)").withContext(fmt::format("{} bytes", want));
  data_ = static_cast<char*>(ptr);
  capacity_ = want;
  return Status::Ok();
}

void PinnedBlock::release() {
  if (!data_) return;
  const size_t limit = static_cast<size_t>(settingInt(Setting::PinnedCache));
  Pool& p = pool();
  bool keep = false;
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    if (p.cachedBytes + capacity_ <= limit) {
      p.free.emplace(capacity_, data_);
      p.cachedBytes += capacity_;
      keep = true;
    }
  }
  if (!keep) cudaFreeHost(data_);
  data_ = nullptr;
  capacity_ = 0;
}

void trimPinnedPool() {
  Pool& p = pool();
  std::multimap<size_t, char*> blocks;
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    blocks.swap(p.free);
    p.cachedBytes = 0;
  }
  for (auto& [size, ptr] : blocks) cudaFreeHost(ptr);
}

size_t pinnedPoolCachedBytes() {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  return p.cachedBytes;
}

}  // namespace loom::device
