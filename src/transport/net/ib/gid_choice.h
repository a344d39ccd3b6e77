// Which GID a port's QPs use. InfiniBand: index 0. RoCE: LOOM_IB_GID_INDEX when set, else the best of
// the table as NCCL chooses: RoCE v2 before v1, an IPv4-mapped address (::ffff:a.b.c.d) before a global
// IPv6 one, never an empty or link-local (fe80::/10) entry unless nothing else is there. A wrong GID is
// what makes RoCE QPs fail to reach each other (completion status 12) or modify_qp refuse (EINVAL).
#pragma once

#include <infiniband/verbs.h>

#include <string>
#include <vector>

#include "base/status.h"
#include "transport/net/ib/verbs_api.h"

namespace loom::net::ib {

enum class GidType { Unknown, Ib, RoceV1, RoceV2 };

struct GidEntry {
  int index = 0;
  ibv_gid gid{};
  GidType type = GidType::Unknown;
};

std::string gidText(const ibv_gid& gid);  // IPv6 notation
const char* gidTypeName(GidType type);

// The non-empty entries of a port's table: the library's _ibv_query_gid_ex when it has one, else
// ibv_query_gid with the type read from sysfs.
void readGidTable(const VerbsApi& api, ibv_context* context, const std::string& device, int port, int tableLength,
                  std::vector<GidEntry>* out);

// `forcedIndex` -1 chooses; `why` says what was chosen and why (for LOOM_DEBUG=INFO).
Status chooseGid(const std::vector<GidEntry>& table, bool ethernet, int forcedIndex, GidEntry* chosen,
                 std::string* why);

}  // namespace loom::net::ib
