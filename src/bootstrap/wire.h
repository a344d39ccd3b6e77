// The bootstrap wire format. Every connection starts with a Hello that proves the unique id's secret
// and the protocol version; anything else is dropped. All integers are little-endian host order
// (the bootstrap only ever connects hosts of one job, which share an architecture).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/process_identity.h"
#include "base/socket.h"
#include "base/status.h"

namespace loom {

constexpr uint32_t kWireMagic = 0x4d4f4f4c;  // "LOOM"
constexpr uint32_t kWireVersion = 3;  // 2: RankInfo carries the state port; 3: its ProcessIdentity
constexpr size_t kSecretBytes = 16;
constexpr uint32_t kMaxFrameBytes = 64u << 20;  // larger frames are refused as junk
constexpr int kHelloTimeoutMs = 2000;           // a peer that connects must say hello this quickly

// State: another rank of the job asks for this rank's flight record (core/observe/state_ports.h).
enum class HelloKind : uint32_t { ToRoot = 1, ToRankZero = 2, Data = 3, State = 4 };

struct Hello {
  uint32_t magic = kWireMagic;
  uint32_t version = kWireVersion;
  uint8_t secret[kSecretBytes] = {0};
  uint32_t kind = 0;
  int32_t rank = -1;
  int32_t nranks = 0;
  int32_t tag = 0;
};

// What each rank tells the others at init.
struct RankInfo {
  SocketAddress listenAddress;
  ProcessIdentity process;  // which host and process the rank runs in
  int32_t cudaDevice = -1;
  // Where this rank answers for its state (listenAddress's host, this port; 0: it does not).
  uint16_t statePort = 0;
};

// Root's answer to a rank: status 0 then nranks RankInfo, or a non-zero status and a reason string.
struct RootReply {
  uint32_t status = 0;
  uint32_t bytes = 0;
};

}  // namespace loom

namespace loom {

// Checks bytes received as a Hello: magic, protocol version, secret, kind and rank range.
// Pure (no I/O) so that it can be fuzzed; every rejection says why.
Status parseHello(const void* bytes, size_t size, const uint8_t* secret, HelloKind expected, int nranks, Hello* out);

// Checks the rendezvous' table for `nranks` ranks.
Status parseRankTable(const void* bytes, size_t size, int nranks, std::vector<RankInfo>* out);

}  // namespace loom
