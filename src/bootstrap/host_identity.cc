#include "bootstrap/host_identity.h"

#include <unistd.h>

#include <cstring>
#include <mutex>
#include <random>

#include "topology/host_identity.h"

namespace loom {
namespace {

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

RankInfo describeThisProcess() {
  RankInfo info;
  HostIdentity host = localHostIdentity();  // the topology's notion of "same host" (LOOM_HOSTID too)
  std::snprintf(info.hostname, sizeof(info.hostname), "%s", host.hostname.c_str());
  info.hostHash = host.hash();
  info.pid = static_cast<int32_t>(getpid());
  info.processNonce = processNonce();
  return info;
}

}  // namespace loom
