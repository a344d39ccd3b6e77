#include "transport/net/ib/memory_registry.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/log.h"

namespace loom::net::ib {

namespace {

constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

uintptr_t pageSize() {
  const long page = sysconf(_SC_PAGESIZE);
  return page > 0 ? static_cast<uintptr_t>(page) : 4096;
}

std::string memlockLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_MEMLOCK, &limit) != 0) return "unknown";
  if (limit.rlim_cur == RLIM_INFINITY) return "unlimited";
  return fmt::format("{} KiB", limit.rlim_cur / 1024);
}

}  // namespace

bool Registration::covers(const void* data, size_t bytes) const {
  if (bytes == 0) return true;
  const uintptr_t p = reinterpret_cast<uintptr_t>(data);
  return mr && p >= start && p + bytes <= end;
}

Status registrationError(int err, const void* data, size_t bytes) {
  std::string hint;
  if (err == ENOMEM || err == EAGAIN)
    hint = fmt::format(": the locked-memory limit is too low (now {}): raise it (ulimit -l unlimited; in a container, "
                       "its memlock limit)",
                       memlockLimit());
  else if (err == EFAULT)
    hint = ": the address range is not mapped memory";
  else if (err == EINVAL)
    hint = ": the device refused the range or the access flags";
  return systemError("ibv_reg_mr of {} bytes at {} failed: {}{}", bytes, data, std::strerror(err), hint);
}

MemoryRegistry::~MemoryRegistry() {
  for (auto& r : held_) {
    LOOM_WARN(Net, "ib: a registration of {} bytes was never released", r->end - r->start);
    api_->deregMr(r->mr);
  }
}

Status MemoryRegistry::acquire(void* data, size_t bytes, Registration** out) {
  if (bytes == 0) {
    *out = &empty_;
    return Status::Ok();
  }
  const uintptr_t page = pageSize();
  const uintptr_t start = reinterpret_cast<uintptr_t>(data) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes + page - 1) & ~(page - 1);
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& r : held_) {
    if (r->start <= start && end <= r->end) {
      ++r->references;
      *out = r.get();
      return Status::Ok();
    }
  }
  errno = 0;
  ibv_mr* mr = api_->regMr(pd_, reinterpret_cast<void*>(start), end - start, kAccess);
  if (!mr) return registrationError(errno ? errno : ENOMEM, data, bytes);
  auto r = std::make_unique<Registration>();
  r->start = start;
  r->end = end;
  r->mr = mr;
  r->references = 1;
  *out = r.get();
  held_.push_back(std::move(r));
  return Status::Ok();
}

void MemoryRegistry::release(Registration* registration) {
  if (!registration || registration == &empty_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find_if(held_.begin(), held_.end(), [&](const auto& r) { return r.get() == registration; });
  if (it == held_.end() || --(*it)->references > 0) return;
  if (api_->deregMr((*it)->mr) != 0) LOOM_WARN(Net, "ib: ibv_dereg_mr failed: {}", std::strerror(errno));
  held_.erase(it);
}

size_t MemoryRegistry::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return held_.size();
}

}  // namespace loom::net::ib
