// Who this process is, for grouping ranks into hosts and processes.
#pragma once

#include "bootstrap/wire.h"

namespace loom {

// hostname, a hash of hostname + kernel boot id (so containers sharing a name still differ), pid.
RankInfo describeThisProcess();

}  // namespace loom
