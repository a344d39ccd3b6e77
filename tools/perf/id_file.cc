#include "id_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <thread>

#include "setting.h"

namespace loomperf {
namespace {

std::optional<int> envInt(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*end != '\0') return std::nullopt;
  return static_cast<int>(x);
}

std::string sanitized(std::string_view s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-') ? c : '_';
  return out;
}

std::string systemError(const std::string& what) { return what + ": " + std::strerror(errno); }

// Files this much older than our own start were left by an earlier job.
constexpr auto kClockMargin = std::chrono::seconds(30);

}  // namespace

std::optional<LauncherRank> detectLauncher() {
  struct Vars {
    const char* rank;
    const char* size;
    const char* launcher;
  };
  static constexpr Vars kVars[] = {
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "Open MPI"},
      {"PMI_RANK", "PMI_SIZE", "PMI"},
      {"MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE", "MVAPICH2"},
  };
  for (const auto& v : kVars) {
    const auto rank = envInt(v.rank);
    const auto size = envInt(v.size);
    if (rank && size && *size > 0 && *rank >= 0 && *rank < *size)
      return LauncherRank{*rank, *size, v.launcher};
  }
  return std::nullopt;
}

std::string idFilePath() {
  if (const std::string path = loomSetting("LOOM_PERF_ID_FILE"); !path.empty()) return path;
  std::string job;
  for (const char* name : {"PMI_JOBID", "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid",
                           "OMPI_MCA_orte_ess_jobid", "SLURM_JOB_ID"}) {
    if (const char* v = std::getenv(name); v && *v) {
      job = v;
      break;
    }
  }
  if (const char* step = std::getenv("SLURM_STEP_ID"); step && !job.empty()) job += std::string(".") + step;
  if (job.empty()) job = "ppid" + std::to_string(getppid());
  return "/tmp/loom-perf-" + std::to_string(getuid()) + "-" + sanitized(job) + ".id";
}

void publishId(const std::string& path, const loomUniqueId& id) {
  const std::string tmp = path + "." + std::to_string(getpid()) + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) throw std::runtime_error(systemError("cannot create " + tmp));
  const bool ok = write(fd, &id, sizeof id) == static_cast<ssize_t>(sizeof id) && fsync(fd) == 0;
  close(fd);
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
    unlink(tmp.c_str());
    throw std::runtime_error(systemError("cannot write " + path));
  }
}

loomUniqueId awaitId(const std::string& path, std::chrono::seconds timeout,
                     std::chrono::system_clock::time_point notBefore) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const auto oldest = std::chrono::system_clock::to_time_t(notBefore - kClockMargin);
  for (;;) {
    struct stat st {};
    if (stat(path.c_str(), &st) == 0 && st.st_size == sizeof(loomUniqueId) && st.st_mtime >= oldest) {
      loomUniqueId id{};
      const int fd = open(path.c_str(), O_RDONLY);
      if (fd >= 0) {
        const bool ok = read(fd, &id, sizeof id) == static_cast<ssize_t>(sizeof id);
        close(fd);
        if (ok) return id;
      }
    }
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("no unique id from rank 0 in " + path + " after " +
                               std::to_string(timeout.count()) +
                               " s (set LOOM_PERF_ID_FILE to a path every rank can read)");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void withdrawId(const std::string& path) { unlink(path.c_str()); }

}  // namespace loomperf
