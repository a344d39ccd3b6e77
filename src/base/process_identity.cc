#include "base/process_identity.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <random>

#include "base/hash.h"
#include "base/settings.h"

namespace loom {
namespace {

template <typename Key>
std::vector<int> groupByFirstAppearance(const std::vector<Key>& keys) {
  std::map<Key, int> hosts;
  std::vector<int> out;
  out.reserve(keys.size());
  for (const Key& key : keys) out.push_back(hosts.emplace(key, static_cast<int>(hosts.size())).first->second);
  return out;
}

uint64_t processNonce() {
  static std::mutex mutex;
  static pid_t madeIn = 0;
  static uint64_t nonce = 0;
  std::lock_guard<std::mutex> lock(mutex);
  if (madeIn != getpid()) {  // first use, or a child forked after the parent made one
    std::random_device random;
    nonce = (uint64_t{random()} << 32) ^ random();
    madeIn = getpid();
  }
  return nonce;
}

}  // namespace

uint64_t HostIdentity::hash() const {
  if (!override.empty()) return Fnv1a().text(override).digest();
  return Fnv1a().text(bootId.empty() ? hostname : hostname + "/" + bootId).digest();
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

ProcessIdentity thisProcess() {
  ProcessIdentity me;
  const HostIdentity host = localHostIdentity();
  std::snprintf(me.hostname, sizeof(me.hostname), "%s", host.hostname.c_str());
  me.hostHash = host.hash();
  me.pid = static_cast<int32_t>(getpid());
  me.nonce = processNonce();
  return me;
}

std::vector<int> groupRanksByHost(const std::vector<std::string>& keys) { return groupByFirstAppearance(keys); }
std::vector<int> groupRanksByHost(const std::vector<uint64_t>& hashes) { return groupByFirstAppearance(hashes); }

}  // namespace loom
