// The plan: the central contract between algorithms (which build it) and the executor (which runs it),
// the verifier (which proves it) and the simulator (which times it). See docs/DESIGN.md, "Plans".
//
// A plan is one rank's share of one operation. It is made of lanes; each lane is an ordered list of
// steps that runs strictly in order, while different lanes progress independently (so a rank can send
// to one peer while it waits on another). A lane owns its connections: for a given (peer, channel,
// direction) at most one lane of a plan sends (or receives), so messages on a connection are matched
// in order between the sending lane of one rank and the receiving lane of the other.
//
// Offsets and counts are in elements of the operation's datatype. Every message is at most
// Plan::maxMessageElems elements and never empty; the executor sizes its FIFO slots from that.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace loom {

enum class Collective : uint8_t {
  AllReduce,
  Broadcast,
  Reduce,
  AllGather,
  ReduceScatter,
  AlltoAll,
  Gather,
  Scatter,
  SendRecv,  // a group's point-to-point operations
};
const char* collectiveName(Collective coll);
// AllReduce, Reduce and ReduceScatter combine the ranks' data with an operator.
bool isReduction(Collective coll);
// Broadcast, Reduce, Gather and Scatter name a root rank.
bool isRooted(Collective coll);

// Buffer table indices. Collectives use kSendBuffer/kRecvBuffer (the user's) and kScratchBuffer (a
// temporary of Plan::scratchElems elements the executor allocates). Point-to-point plans use
// kFirstP2pBuffer + i for the i-th operation of the group, in call order.
constexpr uint32_t kNoBuffer = 0xffffffffu;
constexpr uint32_t kSendBuffer = 0;
constexpr uint32_t kRecvBuffer = 1;
constexpr uint32_t kScratchBuffer = 2;
constexpr uint32_t kFirstP2pBuffer = 3;

// A Recv step's peer that is chosen when the step runs (a receive from any source): the first rank
// whose next message on the lane's channel has arrived; the lane's later steps take the same rank.
constexpr int32_t kAnyPeer = -2;

// Whose buffer a BufRef names. Plans of ranks that can address each other's buffers (peer-memory
// plans: device plan kernels of rank threads on one GPU) may name a peer's buffer, or every rank's: a
// ReduceRanks step's source (each rank's copy, in rank order) or a Copy's or ReduceRanks' destination
// (the same result stored into every rank's buffer). Every other plan names its own buffers only.
constexpr int32_t kOwnRank = -1;
constexpr int32_t kEveryRank = -3;
// The most ranks a peer-memory plan serves (the device keeps every peer's buffers at hand).
constexpr int kMaxPeerMemoryRanks = 8;

struct BufRef {
  uint32_t buffer = kNoBuffer;
  uint64_t offset = 0;  // elements
  int32_t rank = kOwnRank;  // kOwnRank, a rank (peer-memory plans), or kEveryRank
  bool valid() const { return buffer != kNoBuffer; }
  bool own() const { return rank == kOwnRank; }
};

enum class StepKind : uint8_t {
  Send,            // send src[0..count) to sendPeer
  Recv,            // receive count elements from recvPeer into dst
  RecvReduce,      // dst = incoming (op) src
  RecvReduceSend,  // out = incoming (op) src; send out to sendPeer; also store out in dst if valid
  RecvCopySend,    // receive into dst (if valid) and forward the same elements to sendPeer
  Copy,            // dst = src (local; src and dst may be the same memory)
  Reduce,          // dst = dst (op) src (local; src and dst must not overlap); finalize allowed
  // Peer-memory plans only (no messages):
  // All ranks' lanes of the lane's channel meet: a lane passes its k-th Meet once every rank's lane
  // of that channel has reached its k-th. The first one also makes this rank's buffers known to the
  // others (their kernels have started, so the buffers are ready); what a rank reads or writes in a
  // peer's memory is ordered by Meets alone. No src, dst or count.
  Meet,
  // dst = src of rank 0 (op) src of rank 1 (op) ... (op) src of rank n-1 (src.rank is kEveryRank), in
  // that order whoever computes it, so that every rank's result has the same bits (one-shot's order);
  // dst is this rank's, a peer's or every rank's buffer. Finalize allowed.
  ReduceRanks,
};
const char* stepKindName(StepKind kind);

struct Step {
  StepKind kind = StepKind::Copy;
  int32_t sendPeer = -1;
  int32_t recvPeer = -1;
  BufRef src;
  BufRef dst;
  uint64_t count = 0;
  // Apply the operator's post-processing to this step's result (Avg: divide by nranks; PreMulSum:
  // multiply by the scalar). Exactly one step per output element of a reduction carries it, the one
  // that produces the element's complete value, before that value is stored or forwarded.
  bool finalize = false;
};

struct Lane {
  uint32_t channel = 0;  // connection index used for every send/recv of this lane
  std::vector<Step> steps;
};

struct Plan {
  Collective coll = Collective::AllReduce;
  int nranks = 1;
  int rank = 0;
  uint64_t scratchElems = 0;
  uint64_t maxMessageElems = 0;  // largest count of any send/recv step (0 when none)
  uint32_t nchannels = 1;        // channels used: every lane's channel is < nchannels
  std::vector<Lane> lanes;
  std::string algorithm;         // "ring", "direct", "tree", "hier", "oneshot", "p2p" for logs and traces
};

// One point-to-point operation of a group, as the p2p builder sees it.
struct P2pOp {
  bool isSend = false;
  int peer = 0;  // kAnyPeer: a receive from whichever rank sends first
  uint64_t count = 0;  // elements
};

}  // namespace loom
