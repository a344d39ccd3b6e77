// The multi-host test bed from a test's side: scripts/hosts.sh makes the hosts (network namespaces
// joined by a bridge), and a forked rank becomes one of them with enter(): the host's network
// namespace, then UTS, IPC and mount namespaces of its own with the host's name, the host's /dev/shm and a
// /sys of its network namespace and the bed's /etc/hosts, as `hosts.sh exec` does. The bed is taken down when the object goes,
// when the test binary is stopped by a signal, and beds of test binaries that died are collected when
// the next one starts.
#pragma once

#include <memory>
#include <string>

namespace loomtest {

class HostBed {
 public:
  // Makes `hosts` hosts; `impair` ("delay 1ms loss 0.1%") is put on every link (hosts.sh up --impair).
  // On failure returns null with *why set; *unsupported says that this machine cannot make namespaces
  // at all (not root, no netns), the only reason a test may skip.
  static std::unique_ptr<HostBed> create(int hosts, const std::string& impair, std::string* why, bool* unsupported);
  ~HostBed();
  HostBed(const HostBed&) = delete;
  HostBed& operator=(const HostBed&) = delete;

  int hosts() const { return hosts_; }
  std::string hostName(int host) const;  // host 0 .. hosts()-1
  // In a forked child (single-threaded): become `host`. "" on success, else why not.
  std::string enter(int host) const;
  // hosts.sh netem / link on one host; "" on success.
  std::string netem(int host, const std::string& args) const;
  std::string setLink(int host, bool up) const;
  // Runs `command` on `host` through hosts.sh exec and returns its exit status (-1: not run).
  int run(int host, const std::string& command) const;

 private:
  HostBed(std::string bed, int hosts) : bed_(std::move(bed)), hosts_(hosts) {}
  std::string bed_;
  int hosts_;
};

// scripts/hosts.sh (LOOM_HOSTS_SH, set by meson).
std::string hostsScript();

}  // namespace loomtest
