#include "transport/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

namespace loom {

Segment::~Segment() {
  if (base_) munmap(base_, bytes_);
  if (owner_) unlinkName();
}

void Segment::unlinkName() {
  if (!name_.empty() && owner_) {
    shm_unlink(name_.c_str());
    owner_ = false;
  }
}

Status Segment::create(size_t bytes, bool shared, std::shared_ptr<Segment>* out) {
  auto seg = std::shared_ptr<Segment>(new Segment());
  seg->bytes_ = bytes;
  if (!shared) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return systemError("mmap {} bytes: {}", bytes, std::strerror(errno));
    seg->base_ = static_cast<char*>(p);
  } else {
    uint64_t nonce = 0;
    if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce)) nonce = static_cast<uint64_t>(getpid()) * 2654435761u;
    seg->name_ = fmt::format("/loom-{}-{:016x}", getpid(), nonce);
    int fd = shm_open(seg->name_.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) return systemError("shm_open {}: {}", seg->name_, std::strerror(errno));
    seg->owner_ = true;
    if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      int err = errno;
      close(fd);
      return systemError("ftruncate shared memory to {} bytes: {} (is /dev/shm large enough?)", bytes, std::strerror(err));
    }
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return systemError("mmap shared memory: {}", std::strerror(errno));
    seg->base_ = static_cast<char*>(p);
  }
  new (seg->base_) SegmentHeader();
  seg->header()->pid = static_cast<int32_t>(getpid());
  *out = std::move(seg);
  return Status::Ok();
}

Status Segment::open(const std::string& name, size_t bytes, std::shared_ptr<Segment>* out) {
  auto seg = std::shared_ptr<Segment>(new Segment());
  int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return systemError("shm_open {}: {}", name, std::strerror(errno));
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return systemError("mmap {}: {}", name, std::strerror(errno));
  seg->base_ = static_cast<char*>(p);
  seg->bytes_ = bytes;
  seg->name_ = name;
  *out = std::move(seg);
  return Status::Ok();
}

}  // namespace loom
