#include "bootstrap/host_identity.h"

#include <unistd.h>

#include <cstring>

#include "topology/host_identity.h"

namespace loom {

RankInfo describeThisProcess() {
  RankInfo info;
  HostIdentity host = localHostIdentity();  // the topology's notion of "same host" (LOOM_HOSTID too)
  std::snprintf(info.hostname, sizeof(info.hostname), "%s", host.hostname.c_str());
  info.hostHash = host.hash();
  info.pid = static_cast<int32_t>(getpid());
  return info;
}

}  // namespace loom
