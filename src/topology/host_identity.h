// Which ranks share a machine. Two processes are on the same host when they see the same host name and
// the same boot id (/proc/sys/kernel/random/boot_id), so containers with a copied host name on different
// machines, or a machine rebooted between runs, do not look alike. LOOM_HOSTID replaces the whole key
// (tests that pretend to be several hosts; sites with their own naming).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace loom {

struct HostIdentity {
  std::string hostname;
  uint64_t bootIdHash = 0;
  std::string override;  // LOOM_HOSTID, when set

  // The string ranks exchange and compare: "LOOM_HOSTID" or "hostname/0123456789abcdef".
  std::string key() const;
};

HostIdentity localHostIdentity();

// For each rank's identity key, the index of its host, numbered by first appearance:
// {"a/1", "b/2", "a/1"} -> {0, 1, 0}.
std::vector<int> groupRanksByHost(const std::vector<std::string>& keys);

}  // namespace loom
