// Which ranks share a machine. Two processes are on the same host when they see the same host name and
// the same boot id (/proc/sys/kernel/random/boot_id), so containers with a copied host name on different
// machines, or a machine rebooted between runs, do not look alike. LOOM_HOSTID replaces both (tests
// that pretend to be several hosts; sites with their own naming).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace loom {

struct HostIdentity {
  std::string hostname;
  std::string bootId;    // empty where /proc does not offer one
  std::string override;  // LOOM_HOSTID, when set

  // FNV-1a of "hostname/bootId" (or of LOOM_HOSTID): the same value as bootstrap's
  // RankInfo::hostHash, for exchanging in fixed-size messages.
  uint64_t hash() const;
  // Readable form: LOOM_HOSTID, or "hostname/<hash in hex>".
  std::string key() const;
};

HostIdentity localHostIdentity();

// For each rank's host key or hash, the index of its host, numbered by first appearance:
// {"a/1", "b/2", "a/1"} -> {0, 1, 0}.
std::vector<int> groupRanksByHost(const std::vector<std::string>& keys);
std::vector<int> groupRanksByHost(const std::vector<uint64_t>& hashes);

}  // namespace loom
