// Verbs failures in words a user can act on: what failed, with whom, the status as the library names
// it, and what to check (the causes NCCL's users met most: status 12 on RoCE is nearly always a GID or
// reachability problem, modify_qp EINVAL a GID or MTU that does not suit the port).
#pragma once

#include <infiniband/verbs.h>

#include <string>

#include "base/status.h"
#include "transport/net/ib/verbs_api.h"

namespace loom::net::ib {

// What to check for a completion status ("" when there is nothing more to say).
const char* completionHint(ibv_wc_status status);

// `what`: the operation ("an RDMA write of 4096 bytes"); `peer`: who it went to or came from.
Status completionError(const VerbsApi& api, const ibv_wc& wc, const std::string& what, const std::string& peer);

// ibv_modify_qp failed with errno `err` moving a QP to `state` ("INIT", "RTR", "RTS").
Status modifyQpError(int err, const char* state, const std::string& details);

}  // namespace loom::net::ib
