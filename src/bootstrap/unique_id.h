// loomUniqueId contents: the root's address, a random secret and a protocol version.
#pragma once

#include <cstdint>

#include "base/socket.h"
#include "base/status.h"
#include "bootstrap/wire.h"
#include "loom.h"

namespace loom {

struct UniqueIdData {
  uint32_t magic = kWireMagic;
  uint32_t version = kWireVersion;
  uint8_t secret[kSecretBytes] = {0};
  SocketAddress root;
  uint8_t rootStartedByRankZero = 0;  // LOOM_COMM_ID: rank 0 runs the rendezvous, not the id's creator
};
static_assert(sizeof(UniqueIdData) <= sizeof(loomUniqueId), "unique id does not fit");

loomUniqueId encodeUniqueId(const UniqueIdData& data);
Status decodeUniqueId(const loomUniqueId& id, UniqueIdData* out);

// Makes a new id. Without LOOM_COMM_ID it starts the rendezvous (root) in this process, listening
// on a fresh port of the chosen interface. With LOOM_COMM_ID=host:port the id is derived from the
// variable alone (so every rank may compute it) and rank 0 starts the rendezvous during init.
Status createUniqueId(UniqueIdData* out);

}  // namespace loom
