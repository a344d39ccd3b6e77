#include "transport/net/ib/gid_choice.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <fstream>

namespace loom::net::ib {

namespace {

bool isEmpty(const ibv_gid& g) {
  static const uint8_t zero[16] = {};
  return std::memcmp(g.raw, zero, 16) == 0;
}

bool isLinkLocal(const ibv_gid& g) { return g.raw[0] == 0xfe && (g.raw[1] & 0xc0) == 0x80; }

bool isIpv4Mapped(const ibv_gid& g) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g.raw, prefix, 12) == 0;
}

// Higher is better; 0: never chosen on RoCE.
int roceScore(const GidEntry& e) {
  if (isEmpty(e.gid)) return 0;
  const int version = e.type == GidType::RoceV2 ? 3 : e.type == GidType::Unknown ? 2 : e.type == GidType::RoceV1 ? 1 : 0;
  if (version == 0) return 0;
  const int address = isIpv4Mapped(e.gid) ? 3 : isLinkLocal(e.gid) ? 1 : 2;
  return version * 4 + address;
}

GidType typeFromSysfs(const std::string& device, int port, int index) {
  std::ifstream in(fmt::format("/sys/class/infiniband/{}/ports/{}/gid_attrs/types/{}", device, port, index));
  std::string text;
  if (!std::getline(in, text)) return GidType::Unknown;
  if (text.find("v2") != std::string::npos) return GidType::RoceV2;
  if (text.find("RoCE") != std::string::npos) return GidType::RoceV1;
  return GidType::Unknown;
}

}  // namespace

std::string gidText(const ibv_gid& gid) {
  char text[INET6_ADDRSTRLEN] = {};
  if (!inet_ntop(AF_INET6, gid.raw, text, sizeof text)) return "?";
  return text;
}

const char* gidTypeName(GidType type) {
  switch (type) {
    case GidType::Ib: return "IB";
    case GidType::RoceV1: return "RoCE v1";
    case GidType::RoceV2: return "RoCE v2";
    default: return "type unknown";
  }
}

void readGidTable(const VerbsApi& api, ibv_context* context, const std::string& device, int port, int tableLength,
                  std::vector<GidEntry>* out) {
  out->clear();
  for (int i = 0; i < tableLength; ++i) {
    GidEntry e;
    e.index = i;
    if (api.queryGidEx) {
      ibv_gid_entry entry{};
      if (api.queryGidEx(context, static_cast<uint32_t>(port), static_cast<uint32_t>(i), &entry, 0, sizeof entry) != 0)
        continue;  // ENODATA: an unconfigured entry
      e.gid = entry.gid;
      e.type = entry.gid_type == IBV_GID_TYPE_ROCE_V2   ? GidType::RoceV2
               : entry.gid_type == IBV_GID_TYPE_ROCE_V1 ? GidType::RoceV1
                                                        : GidType::Ib;
    } else {
      if (api.queryGid(context, static_cast<uint8_t>(port), i, &e.gid) != 0) continue;
      e.type = typeFromSysfs(device, port, i);
    }
    if (!isEmpty(e.gid)) out->push_back(e);
  }
}

Status chooseGid(const std::vector<GidEntry>& table, bool ethernet, int forcedIndex, GidEntry* chosen,
                 std::string* why) {
  auto describe = [&] {
    std::string all;
    for (const GidEntry& e : table)
      all += fmt::format("{}{}: {} ({})", all.empty() ? "" : ", ", e.index, gidText(e.gid), gidTypeName(e.type));
    return all.empty() ? std::string("none") : all;
  };
  if (forcedIndex >= 0) {
    auto it = std::find_if(table.begin(), table.end(), [&](const GidEntry& e) { return e.index == forcedIndex; });
    if (it == table.end())
      return invalidArgument("LOOM_IB_GID_INDEX={}: the port has no GID at that index (it has: {})", forcedIndex,
                             describe());
    *chosen = *it;
    *why = "LOOM_IB_GID_INDEX";
    return Status::Ok();
  }
  if (!ethernet) {
    // InfiniBand addresses by LID; GID 0 is the port's own and serves a routed (GRH) path.
    GidEntry e;
    auto it = std::find_if(table.begin(), table.end(), [](const GidEntry& g) { return g.index == 0; });
    if (it != table.end()) e = *it;
    *chosen = e;
    *why = "InfiniBand: index 0";
    return Status::Ok();
  }
  const GidEntry* best = nullptr;
  for (const GidEntry& e : table)
    if (roceScore(e) > 0 && (!best || roceScore(e) > roceScore(*best))) best = &e;
  if (!best)
    return systemError("no usable RoCE GID (the interface under the port needs an IP address; the table has: {})",
                       describe());
  *chosen = *best;
  *why = fmt::format("{}{}", gidTypeName(best->type),
                     isIpv4Mapped(best->gid) ? " with an IPv4 address" : isLinkLocal(best->gid) ? ", link-local only" : "");
  return Status::Ok();
}

}  // namespace loom::net::ib
