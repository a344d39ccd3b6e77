// Who a rank is: the process it runs in and the host that process runs on. One struct for every layer:
// the bootstrap exchanges it (inside RankInfo), the transports choose by it (same process, same host,
// another host), the device layer decides by it which peers share its address space, the topology
// groups ranks into hosts by it.
//
// Two processes are on the same host when they see the same host name and the same boot id
// (/proc/sys/kernel/random/boot_id), so containers with a copied host name on different machines, or a
// machine rebooted between runs, do not look alike. LOOM_HOSTID replaces both (tests that pretend to be
// several hosts; sites with their own naming). A pid repeats across PID namespaces (containers) on one
// host, so two ranks share an address space only when host, pid and a random per-process nonce agree.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace loom {

struct HostIdentity {
  std::string hostname;
  std::string bootId;    // empty where /proc does not offer one
  std::string override;  // LOOM_HOSTID, when set

  // FNV-1a of "hostname/bootId" (or of LOOM_HOSTID): ProcessIdentity::hostHash, for exchanging in
  // fixed-size messages.
  uint64_t hash() const;
  // Readable form: LOOM_HOSTID, or "hostname/<hash in hex>".
  std::string key() const;
};

HostIdentity localHostIdentity();

// Plain data: it travels in the bootstrap's fixed-size messages as it is.
struct ProcessIdentity {
  uint64_t hostHash = 0;   // HostIdentity::hash(): same value <=> same host
  int32_t pid = 0;
  uint64_t nonce = 0;      // random, made once per process (anew in a forked child)
  char hostname[64] = {0};

  bool sameHost(const ProcessIdentity& o) const { return hostHash == o.hostHash; }
  bool sameProcess(const ProcessIdentity& o) const {
    return hostHash == o.hostHash && pid == o.pid && nonce == o.nonce;
  }
  std::string host() const { return std::string(hostname, strnlen(hostname, sizeof hostname)); }
};

// This process: its host's identity, pid and nonce.
ProcessIdentity thisProcess();

// For each rank's host key or hash, the index of its host, numbered by first appearance:
// {"a/1", "b/2", "a/1"} -> {0, 1, 0}.
std::vector<int> groupRanksByHost(const std::vector<std::string>& keys);
std::vector<int> groupRanksByHost(const std::vector<uint64_t>& hashes);

}  // namespace loom
