#include "bootstrap/unique_id.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "base/hash.h"
#include "base/settings.h"
#include "base/log.h"
#include "bootstrap/root.h"

namespace loom {

loomUniqueId encodeUniqueId(const UniqueIdData& data) {
  loomUniqueId id;
  std::memset(&id, 0, sizeof(id));
  std::memcpy(id.internal, &data, sizeof(data));
  return id;
}

Status decodeUniqueId(const loomUniqueId& id, UniqueIdData* out) {
  std::memcpy(out, id.internal, sizeof(*out));
  if (out->magic != kWireMagic) return invalidArgument("the unique id was not made by loomGetUniqueId");
  if (out->version != kWireVersion)
    return invalidArgument("the unique id has protocol version {}, this library speaks {}", out->version, kWireVersion);
  if (!out->root.valid()) return invalidArgument("the unique id holds no root address");
  return Status::Ok();
}

Status createUniqueId(UniqueIdData* out) {
  UniqueIdData data;
  std::string commId = settingText(Setting::CommId);
  if (!commId.empty()) {
    LOOM_TRY(parseSocketAddress(commId, &data.root).withContext("LOOM_COMM_ID"));
    // Every rank derives the same id from the variable, so the secret can only be as private as it.
    uint64_t a = Fnv1a(0x6c6f6f6d).text(commId).digest(), b = Fnv1a(0x73656372).text(commId).digest();
    std::memcpy(data.secret, &a, 8);
    std::memcpy(data.secret + 8, &b, 8);
    data.rootStartedByRankZero = 1;
    *out = data;
    return Status::Ok();
  }
  if (getrandom(data.secret, sizeof(data.secret), 0) != static_cast<ssize_t>(sizeof(data.secret)))
    return systemError("getrandom: {}", std::strerror(errno));
  SocketAddress local;
  LOOM_TRY(chooseLocalAddress(&local));
  Socket listener;
  LOOM_TRY(listenOn(local, &listener, &data.root));
  LOOM_INFO(Boot, "unique id: rendezvous listening on {}", data.root.toString());
  startRoot(std::move(listener), data);
  *out = data;
  return Status::Ok();
}

}  // namespace loom
