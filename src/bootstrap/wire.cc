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
  if (h.nranks < 1 || (nranks > 0 && h.nranks != nranks))
    return invalidArgument("hello for {} ranks (expected {})", h.nranks, nranks);
  if (h.rank < 0 || h.rank >= h.nranks) return invalidArgument("rank {} outside 0..{}", h.rank, h.nranks - 1);
  *out = h;
  return Status::Ok();
}

Status parseRankTable(const void* bytes, size_t size, int nranks, std::vector<RankInfo>* out) {
  if (nranks < 1 || size != static_cast<size_t>(nranks) * sizeof(RankInfo))
    return errorStatus(loomRemoteError, "rank table of {} bytes for {} ranks", size, nranks);
  std::vector<RankInfo> table(static_cast<size_t>(nranks));
  std::memcpy(table.data(), bytes, size);
  for (int r = 0; r < nranks; ++r) {
    RankInfo& info = table[static_cast<size_t>(r)];
    if (!info.listenAddress.valid() || info.listenAddress.port == 0)
      return errorStatus(loomRemoteError, "rank table: rank {} has no valid address", r);
    info.process.hostname[sizeof(info.process.hostname) - 1] = '\0';
  }
  *out = std::move(table);
  return Status::Ok();
}

}  // namespace loom
