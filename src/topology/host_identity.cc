#include "topology/host_identity.h"

#include <fmt/format.h>
#include <unistd.h>

#include <fstream>
#include <map>

#include "base/settings.h"

namespace loom {
namespace {

uint64_t fnv1a(const std::string& text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : text) hash = (hash ^ c) * 0x100000001b3ull;
  return hash;
}

template <typename Key>
std::vector<int> groupByFirstAppearance(const std::vector<Key>& keys) {
  std::map<Key, int> hosts;
  std::vector<int> out;
  out.reserve(keys.size());
  for (const Key& key : keys) out.push_back(hosts.emplace(key, static_cast<int>(hosts.size())).first->second);
  return out;
}

}  // namespace

uint64_t HostIdentity::hash() const {
  if (!override.empty()) return fnv1a(override);
  return fnv1a(bootId.empty() ? hostname : hostname + "/" + bootId);
}

std::string HostIdentity::key() const {
  if (!override.empty()) return override;
  return fmt::format("{}/{:016x}", hostname, hash());
}

HostIdentity localHostIdentity() {
  HostIdentity id;
  id.override = settingText(Setting::HostId);
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) == 0) id.hostname = host;
  std::ifstream file("/proc/sys/kernel/random/boot_id");
  file >> id.bootId;  // absent (non-Linux, restricted /proc): the host name alone decides
  return id;
}

std::vector<int> groupRanksByHost(const std::vector<std::string>& keys) { return groupByFirstAppearance(keys); }
std::vector<int> groupRanksByHost(const std::vector<uint64_t>& hashes) { return groupByFirstAppearance(hashes); }

}  // namespace loom
