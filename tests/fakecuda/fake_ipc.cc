#include "fake_ipc.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>

namespace fakecuda {

namespace {

constexpr uint64_t kMagic = 0x3143504941464b46ull;  // marks a handle this fake made

struct HandleFields {
  uint64_t magic, pid, fd, id, bytes;
};
static_assert(sizeof(HandleFields) <= sizeof(cudaIpcMemHandle_t::reserved));

HandleFields fieldsOf(const cudaIpcMemHandle_t& handle) {
  HandleFields f{};
  std::memcpy(&f, handle.reserved, sizeof f);
  return f;
}

std::string memfdName(uint64_t id) { return "fakecuda-" + std::to_string(id); }

// A test allocates a descriptor per live cudaMalloc: the soft limit of open files is raised to the hard
// one once, as a process with many device buffers would need on a real machine's limits anyway.
void allowManyDescriptors() {
  static const bool raised = [] {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
      limit.rlim_cur = limit.rlim_max;
      setrlimit(RLIMIT_NOFILE, &limit);
    }
    return true;
  }();
  (void)raised;
}

}  // namespace

void* mapSharedBlock(size_t bytes, int* fd, uint64_t* id) {
  static std::atomic<uint64_t> next{1};
  allowManyDescriptors();
  *id = next.fetch_add(1);
  *fd = memfd_create(memfdName(*id).c_str(), MFD_CLOEXEC);
  if (*fd < 0) return nullptr;
  void* base = MAP_FAILED;
  if (ftruncate(*fd, static_cast<off_t>(bytes)) == 0)
    base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
  if (base == MAP_FAILED) {
    close(*fd);
    *fd = -1;
    return nullptr;
  }
  return base;
}

void unmapSharedBlock(void* base, size_t bytes, int fd) {
  munmap(base, bytes);
  if (fd >= 0) close(fd);
}

cudaIpcMemHandle_t handleOf(int fd, uint64_t id, size_t bytes) {
  cudaIpcMemHandle_t handle{};
  const HandleFields fields{kMagic, static_cast<uint64_t>(getpid()), static_cast<uint64_t>(fd), id, bytes};
  std::memcpy(handle.reserved, &fields, sizeof fields);
  return handle;
}

cudaError_t handleKey(const cudaIpcMemHandle_t& handle, uint64_t key[2]) {
  const HandleFields f = fieldsOf(handle);
  if (f.magic != kMagic || f.bytes == 0) return cudaErrorInvalidValue;
  if (f.pid == static_cast<uint64_t>(getpid())) return cudaErrorDeviceUninitialized;  // the exporter has the address
  key[0] = f.pid;
  key[1] = f.id;
  return cudaSuccess;
}

cudaError_t mapHandle(const cudaIpcMemHandle_t& handle, void** base, size_t* bytes) {
  uint64_t key[2];
  if (const cudaError_t err = handleKey(handle, key); err != cudaSuccess) return err;
  const HandleFields f = fieldsOf(handle);
  // The descriptor number may have been reused since the handle was made: it must still be that
  // allocation's memfd.
  const std::string path = "/proc/" + std::to_string(f.pid) + "/fd/" + std::to_string(f.fd);
  char target[256];
  const ssize_t n = readlink(path.c_str(), target, sizeof target - 1);
  if (n <= 0) return cudaErrorMapBufferObjectFailed;
  target[n] = '\0';
  if (std::string(target).rfind("/memfd:" + memfdName(f.id) + " ", 0) != 0) return cudaErrorMapBufferObjectFailed;
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return cudaErrorMapBufferObjectFailed;
  void* mapped = mmap(nullptr, f.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);  // the mapping keeps the memory
  if (mapped == MAP_FAILED) return cudaErrorMapBufferObjectFailed;
  *base = mapped;
  *bytes = f.bytes;
  return cudaSuccess;
}

}  // namespace fakecuda
