#include "topology/host_identity.h"

#include <fmt/format.h>
#include <unistd.h>

#include <fstream>
#include <map>

#include "base/env.h"

namespace loom {
namespace {

uint64_t fnv1a(const std::string& text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

}  // namespace

std::string HostIdentity::key() const {
  if (!override.empty()) return override;
  return fmt::format("{}/{:016x}", hostname, bootIdHash);
}

HostIdentity localHostIdentity() {
  HostIdentity id;
  id.override = envString("LOOM_HOSTID", "");
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) == 0) id.hostname = host;
  std::string bootId;
  std::ifstream file("/proc/sys/kernel/random/boot_id");
  std::getline(file, bootId);  // absent (non-Linux, restricted /proc): the host name alone decides
  id.bootIdHash = fnv1a(bootId);
  return id;
}

std::vector<int> groupRanksByHost(const std::vector<std::string>& keys) {
  std::map<std::string, int> hosts;
  std::vector<int> out;
  out.reserve(keys.size());
  for (const std::string& key : keys) {
    auto [it, inserted] = hosts.emplace(key, static_cast<int>(hosts.size()));
    out.push_back(it->second);
  }
  return out;
}

}  // namespace loom
