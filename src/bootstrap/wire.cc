#include "bootstrap/wire.h"

#include <cstring>

namespace loom {

Status parseHello(const void* bytes, size_t size, const uint8_t* secret, HelloKind expected, int nranks, Hello* out) {
  if (size != sizeof(Hello)) return invalidArgument("hello of {} bytes (expected {})", size, sizeof(Hello));
  Hello h;
  std::memcpy(&h, bytes, sizeof(h));
  if (h.magic != kWireMagic) return invalidArgument("not a Loom hello (magic {:#x})", h.magic);
  if (h.version != kWireVersion)
    return invalidArgument("protocol version {} (this library speaks {})", h.version, kWireVersion);
  if (std::memcmp(h.secret, secret, kSecretBytes) != 0) return invalidArgument("wrong secret");
  if (h.kind != static_cast<uint32_t>(expected)) return invalidArgument("unexpected hello kind {}", h.kind);
  if (h.nranks < 1 || h.nranks > kMaxRanks || (nranks > 0 && h.nranks != nranks))
    return invalidArgument("hello for {} ranks (expected {})", h.nranks, nranks);
  if (h.rank < 0 || h.rank >= h.nranks) return invalidArgument("rank {} outside 0..{}", h.rank, h.nranks - 1);
  *out = h;
  return Status::Ok();
}

}  // namespace loom
