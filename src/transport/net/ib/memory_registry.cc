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

Status registrationError(int err, const void* data, size_t bytes, bool dmabuf) {
  std::string hint;
  if (dmabuf && (err == EOPNOTSUPP || err == EPROTONOSUPPORT))
    hint = ": this kernel or NIC driver cannot register dmabuf memory (LOOM_DMABUF_ENABLE=0 uses nvidia-peermem "
           "instead, where it is loaded)";
  else if (err == ENOMEM || err == EAGAIN)
    hint = fmt::format(": the locked-memory limit is too low (now {}): raise it (ulimit -l unlimited; in a container, "
                       "its memlock limit)",
                       memlockLimit());
  else if (err == EFAULT)
    hint = ": the address range is not mapped memory";
  else if (err == EINVAL)
    hint = ": the device refused the range or the access flags";
  return systemError("{} of {} bytes at {} failed: {}{}", dmabuf ? "ibv_reg_dmabuf_mr" : "ibv_reg_mr", bytes, data,
                     std::strerror(err), hint);
}

MemoryRegistry::~MemoryRegistry() {
  for (auto& r : held_) {
    LOOM_WARN(Net, "ib: a registration of {} bytes was never released", r->end - r->start);
    api_->deregMr(r->mr);
  }
}

Registration* MemoryRegistry::reuse(uintptr_t start, uintptr_t end, bool gpu) {
  for (auto& r : held_) {
    if (r->gpu == gpu && r->start <= start && end <= r->end) {
      ++r->references;
      return r.get();
    }
  }
  return nullptr;
}

Registration* MemoryRegistry::hold(uintptr_t start, uintptr_t end, ibv_mr* mr, bool gpu) {
  auto r = std::make_unique<Registration>();
  r->start = start;
  r->end = end;
  r->mr = mr;
  r->references = 1;
  r->gpu = gpu;
  held_.push_back(std::move(r));
  return held_.back().get();
}

Status MemoryRegistry::acquire(void* data, size_t bytes, Registration** out, bool gpu) {
  if (bytes == 0) {
    *out = &empty_;
    return Status::Ok();
  }
  const uintptr_t page = pageSize();
  const uintptr_t start = reinterpret_cast<uintptr_t>(data) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes + page - 1) & ~(page - 1);
  std::lock_guard<std::mutex> lock(mutex_);
  if ((*out = reuse(start, end, gpu))) return Status::Ok();
  errno = 0;
  ibv_mr* mr = api_->regMr(pd_, reinterpret_cast<void*>(start), end - start, kAccess);
  if (!mr) return registrationError(errno ? errno : ENOMEM, data, bytes);
  *out = hold(start, end, mr, gpu);
  return Status::Ok();
}

Status MemoryRegistry::acquireDmabuf(void* data, size_t bytes, int fd, uint64_t offset, Registration** out) {
  if (bytes == 0) {
    *out = &empty_;
    return Status::Ok();
  }
  if (!api_->regDmabufMr) return systemError("{} has no ibv_reg_dmabuf_mr (rdma-core 34 or newer has it)", api_->path);
  // Whole pages, as for host memory: the fd's offset moves with the address.
  const uintptr_t page = pageSize();
  const uintptr_t start = reinterpret_cast<uintptr_t>(data) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes + page - 1) & ~(page - 1);
  const uint64_t before = reinterpret_cast<uintptr_t>(data) - start;
  if (offset < before)
    return invalidArgument("dmabuf registration of {} bytes at {}: offset {} into the fd starts inside a page the fd "
                           "does not hold (export whole pages)", bytes, data, offset);
  std::lock_guard<std::mutex> lock(mutex_);
  if ((*out = reuse(start, end, /*gpu=*/true))) return Status::Ok();
  errno = 0;
  ibv_mr* mr = api_->regDmabufMr(pd_, offset - before, end - start, start, fd, kAccess);
  if (!mr) return registrationError(errno ? errno : ENOMEM, data, bytes, /*dmabuf=*/true);
  *out = hold(start, end, mr, /*gpu=*/true);
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
