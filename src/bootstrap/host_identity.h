// Who this process is, for grouping ranks into hosts and processes.
#pragma once

#include "bootstrap/wire.h"

namespace loom {

// hostname, the host identity hash of topology/host_identity.h (hostname + boot id, or LOOM_HOSTID), pid,
// and this process's random nonce (made anew in a forked child).
RankInfo describeThisProcess();

}  // namespace loom
