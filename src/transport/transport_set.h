// All of one rank's connections in a communicator, chosen per peer by where the peer lives:
// same process -> local (a heap segment shared by address), same host -> shm, else socket.
// LOOM_TRANSPORT=shm|socket forces a slower transport for testing (shm for same-host peers,
// socket for all). Nothing here knows which collective a message belongs to.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/exchange.h"
#include "transport/connection.h"
#include "transport/doorbell.h"
#include "transport/segment.h"

namespace loom {

enum class TransportKind : uint8_t { Self, Local, Shm, Socket };
const char* transportKindName(TransportKind kind);

struct PeerLocation {
  uint64_t hostHash = 0;
  int32_t pid = 0;
  std::string hostname;
  uint64_t processNonce = 0;  // bootstrap/wire.h's RankInfo says why a pid alone is not enough
  bool sameProcess(const PeerLocation& o) const {
    return hostHash == o.hostHash && pid == o.pid && processNonce == o.processNonce;
  }
};

struct TransportOptions {
  int nchannels = 1;
  size_t nslots = 4;
  size_t slotBytes = 256 << 10;
  std::string forced;  // "", "shm" or "socket"
  // Called on this rank's FIFO memory before anything touches it: the communicator places it on the
  // rank's NUMA node (topology/numa_binding.h); unset leaves it where it is first touched.
  std::function<void(void*, size_t)> placeMemory;
};

TransportKind selectTransport(const PeerLocation& a, const PeerLocation& b, const std::string& forced);

class TransportSet {
 public:
  ~TransportSet();
  static Status create(PeerExchange& exchange, const std::vector<PeerLocation>& peers,
                       const TransportOptions& options, std::unique_ptr<TransportSet>* out);

  SendConnection* send(int peer, int channel) const { return sends_[index(peer, channel)].get(); }
  RecvConnection* recv(int peer, int channel) const { return recvs_[index(peer, channel)].get(); }
  TransportKind kind(int peer) const { return kinds_[peer]; }
  int nchannels() const { return options_.nchannels; }
  size_t slotBytes() const { return options_.slotBytes; }
  bool hasSocketPeers() const { return hasSocketPeers_; }
  bool hasMemoryPeers() const { return own_ != nullptr; }
  // Whether another rank of this communicator lives in this process (threads), whatever transport
  // was forced between them.
  bool hasPeerInThisProcess() const;
  // This rank's doorbell: rung by peers on delivery and by loomCommAbort.
  Doorbell* bell() const { return bell_; }
  // loomRemoteError naming the peer when it is known to have failed (memory peers only; socket
  // peers report failure through their connections).
  Status peerHealth(int peer) const;
  // The failure a memory peer recorded in its segment (no system call: cheap enough per operation),
  // so that an operation does not start, and perhaps even complete, with a rank that already gave up.
  Status peerRecordedFailure(int peer) const;
  // Marks this rank failed so that memory peers waiting on it give up, and wakes them. Socket peers
  // are told too when `notifySockets` (only from the thread that drives the connections).
  void markFailed(const std::string& reason, bool notifySockets);
  std::string describePeer(int peer) const;

 private:
  TransportSet() = default;
  size_t index(int peer, int channel) const { return static_cast<size_t>(peer) * options_.nchannels + channel; }
  Status setupMemory(PeerExchange& exchange);
  Status setupSockets(PeerExchange& exchange);
  std::vector<int> memoryPeersOf(int rank) const;

  int rank_ = 0;
  int nranks_ = 1;
  TransportOptions options_;
  std::vector<PeerLocation> peers_;
  std::vector<TransportKind> kinds_;
  bool hasSocketPeers_ = false;
  std::vector<std::unique_ptr<SendConnection>> sends_;
  std::vector<std::unique_ptr<RecvConnection>> recvs_;
  std::shared_ptr<Segment> own_;
  std::vector<std::shared_ptr<Segment>> peerSegments_;  // indexed by rank; null when not a memory peer
  std::vector<int> pidfds_;  // per rank, for shm peers: readable once the process has exited
  std::unique_ptr<Doorbell> privateBell_;
  Doorbell* bell_ = nullptr;
};

}  // namespace loom
