#include "bootstrap/table_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/hash.h"
#include "bootstrap/wire.h"

namespace loom {

TableFile::~TableFile() {
  if (!name_.empty()) shm_unlink(name_.c_str());
}

Status TableFile::publish(const uint8_t* secret, uint64_t tableId, int leaderRank, const std::vector<char>& bytes,
                          TableFile* out) {
  const uint64_t job = Fnv1a(0x7461626c).bytes(secret, kSecretBytes).digest();
  const std::string name = fmt::format("/loom-table-{:016x}-{:016x}-{}", job, tableId, leaderRank);
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return systemError("shm_open {}: {}", name, std::strerror(errno));
  out->name_ = name;  // from here on the file is unlinked with `out`
  Status st = Status::Ok();
  if (ftruncate(fd, static_cast<off_t>(bytes.size())) != 0) st = systemError("ftruncate {}: {}", name, std::strerror(errno));
  for (size_t done = 0; st.ok() && done < bytes.size();) {
    const ssize_t n = pwrite(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
    if (n <= 0 && errno != EINTR) st = systemError("write {}: {}", name, std::strerror(errno));
    if (n > 0) done += static_cast<size_t>(n);
  }
  ::close(fd);
  return st;
}

Status readTableFile(const std::string& name, size_t bytes, const std::function<Status(const void*, size_t)>& use) {
  const int fd = shm_open(name.c_str(), O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) return systemError("shm_open {}: {}", name, std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes) {
    ::close(fd);
    return systemError("{} holds {} bytes, not {}", name, static_cast<long long>(st.st_size), bytes);
  }
  void* p = bytes ? mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0) : nullptr;
  ::close(fd);
  if (p == MAP_FAILED) return systemError("mmap {}: {}", name, std::strerror(errno));
  Status result = use(p, bytes);
  if (p) munmap(p, bytes);
  return result;
}

}  // namespace loom
