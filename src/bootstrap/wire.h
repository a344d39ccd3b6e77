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
// 2: RankInfo carries the state port; 3: its ProcessIdentity; 4: per-host leaders and a compact table
constexpr uint32_t kWireVersion = 4;
constexpr size_t kSecretBytes = 16;
constexpr uint32_t kMaxFrameBytes = 64u << 20;  // larger frames are refused as junk
constexpr int kHelloTimeoutMs = 2000;           // a peer that connects must say hello this quickly
constexpr int kMessagePollMs = 50;              // a wait for a message looks at its abort flag this often
constexpr int32_t kProbeTag = 0x50524f42;       // "PROB": a data connection that only asks whether a rank is there
constexpr int32_t kMaxRanks = 1 << 24;          // a hello for more ranks is junk (tables are sized by it)

// ToRoot: a rank joins the rendezvous. ToLeader: a rank joins its host's leader (bootstrap_tree.h).
// FromParent: the table (or the job's failure) comes down the tree of leaders, from the rendezvous
// or a parent leader. Data: a transport's connection. State: another rank of the job asks for this
// rank's flight record (core/observe/state_ports.h).
enum class HelloKind : uint32_t { ToRoot = 1, ToLeader = 2, Data = 3, State = 4, FromParent = 5 };

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

// A framed answer (the rendezvous to a rank, a leader down its tree or to its local ranks): status 0
// and `bytes` of payload, or a non-zero status and a reason string of `bytes`. Its layout never
// changes between wire versions, so a rank of another version still reads why it was refused.
struct Frame {
  uint32_t status = 0;  // FrameStatus
  uint32_t bytes = 0;
};
enum FrameStatus : uint32_t {
  kFrameOk = 0,
  kFrameRefused = 1,
  kFrameTableFile = 2,  // a leader to its host's ranks: the table is in a shared-memory file (TableFileRef)
};

// Where a host's leader put the table for its host's ranks (table_file.h), and the table's id
// (rank_table.h): a rank of a process that already holds that table opens nothing.
struct TableFileRef {
  char name[64] = {0};
  uint64_t bytes = 0;
  uint64_t tableId = 0;
};

}  // namespace loom

namespace loom {

// Checks bytes received as a Hello: magic, protocol version, secret, kind and rank range.
// Pure (no I/O) so that it can be fuzzed; every rejection says why.
Status parseHello(const void* bytes, size_t size, const uint8_t* secret, HelloKind expected, int nranks, Hello* out);


}  // namespace loom
