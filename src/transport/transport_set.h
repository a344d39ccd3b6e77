// All of one rank's connections in a communicator, chosen per peer by where the peer lives:
// same process -> local (a heap segment shared by address), same host -> shm, else net (the network
// layer, net/: one provider per communicator, chosen by TransportOptions::netProvider).
// LOOM_TRANSPORT=shm|net forces a slower transport for testing (shm for same-host peers, net for
// all; "socket" is the old name of net). Nothing here knows which collective a message belongs to.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/exchange.h"
#include "base/process_identity.h"
#include "transport/connection.h"
#include "transport/doorbell.h"
#include "transport/lazy_slots.h"
#include "transport/net/fifo_proxy.h"
#include "transport/net/gdr_choice.h"
#include "transport/net/net_connection.h"
#include "transport/net/net_pairing.h"
#include "transport/net/net_setup.h"
#include "transport/net/provider.h"
#include "transport/segment.h"

namespace loom {

enum class TransportKind : uint8_t { Self, Local, Shm, Net };
const char* transportKindName(TransportKind kind);

struct TransportOptions {
  int nchannels = 1;
  size_t nslots = 4;
  size_t slotBytes = 256 << 10;
  std::string forced;       // "", "shm", "net" (or its old name "socket")
  std::string netProvider;  // LOOM_NET: "" (the best available), socket, ucx or a plugin's name
  std::string netDevice;    // the NIC, LOOM_SOCKET_IFNAME syntax ("" the topology's, below)
  // The topology's NIC for this rank in a job of several hosts, taken when netDevice is "" and the
  // provider has it; otherwise the provider's first device.
  net::PreferredNic netPreferred;
  bool netDirect = true;    // network sends may leave straight from the caller's buffers
  // The rank's GPU (-1: none) and what its CUDA driver says of dmabuf export (device_layer.h), for
  // the GPUDirect RDMA decision (net/gdr_choice.h).
  int cudaDevice = -1;
  bool cudaDmabuf = false;
  std::string cudaDmabufWhy;
  int64_t timeoutMs = 0;    // connection setup (0: none)
  bool netConnectEager = false;  // LOOM_NET_CONNECT=eager: every network connection at setup
  // Called on this rank's FIFO memory before anything touches it: the communicator places it on the
  // rank's NUMA node (topology/numa_binding.h); unset leaves it where it is first touched.
  std::function<void(void*, size_t)> placeMemory;
};

TransportKind selectTransport(const ProcessIdentity& a, const ProcessIdentity& b, const std::string& forced);

class TransportSet {
 public:
  ~TransportSet();  // close(), then the pidfds
  // Releases the connections and then the network provider their comms use (a second call does
  // nothing). Every caller of the connections must have stopped.
  void close();
  static Status create(PeerExchange& exchange, const std::vector<ProcessIdentity>& peers,
                       const TransportOptions& options, std::unique_ptr<TransportSet>* out);

  // A peer's connection on a channel (null for this rank itself, and for a network peer not connected
  // yet: connectNet). A memory peer's are made on first use (its segment is mapped at setup, so no peer
  // takes part): a plan reaches a few peers, and objects for all of them cost a rank O(n) at init.
  SendConnection* send(int peer, int channel) const {
    return sends_.getOrMake(index(peer, channel), [&] { return makeMemorySend(peer, channel); });
  }
  RecvConnection* recv(int peer, int channel) const {
    return recvs_.getOrMake(index(peer, channel), [&] { return makeMemoryRecv(peer, channel); });
  }
  TransportKind kind(int peer) const { return kinds_[peer]; }
  // A network peer's connections, every channel both ways: made on first use (net/net_pairing.h) unless
  // LOOM_NET_CONNECT=eager made them all at setup. Without waiting: *up false while the peer has not
  // answered; call again (the peer does the same on its side). An error names the peer.
  Status connectNet(int peer, bool* up) const;
  // What the network provider holds for its comms, moved on (net::Provider::progress): every pass of a
  // wait of a rank with network peers.
  void progressNet() const {
    if (netProvider_) netProvider_->progress();
  }
  // A receive from any rank: advances the connections that network peers asked for (their offers came).
  Status answerNetPeers() const;
  // Whether a network peer's connections are made (true for other peers).
  bool netConnected(int peer) const {
    return kinds_[peer] != TransportKind::Net || sends_.get(index(peer, channels_ - 1)) != nullptr;
  }
  // A network peer without connections: loomRemoteError when its process is gone (its bootstrap listener
  // refuses a connection), else Ok.
  Status probeNetPeer(int peer) const;
  // The network connections open (a send or a receive comm per net peer and channel).
  int openNetConnections() const;
  // The memory peers' connections made so far (a send or a receive per peer and channel used).
  int madeMemoryConnections() const;
  // The channels collectives use, 0..nchannels()-1 (LOOM_NCHANNELS). Point-to-point operations have
  // a channel of their own after them: on it, a peer's next message is always its next send to this
  // rank, never a collective's, so a receive from any source can take whichever peer's comes first
  // (as MPI keeps point-to-point and collective traffic apart). It costs one more connection per peer.
  int nchannels() const { return options_.nchannels; }
  int p2pChannel() const { return options_.nchannels; }
  size_t slotBytes() const { return options_.slotBytes; }
  bool hasNetPeers() const { return hasNetPeers_; }
  bool hasMemoryPeers() const { return own_ != nullptr; }
  // Whether another rank of this communicator lives in this process (threads), whatever transport
  // was forced between them.
  bool hasPeerInThisProcess() const;
  // This rank's doorbell: rung by peers on delivery and by loomCommAbort.
  Doorbell* bell() const { return bell_; }
  // loomRemoteError naming the peer when it is known to have failed: a memory peer's segment says so
  // or its process exited, a net peer's failure notice arrived or its connection broke.
  Status peerHealth(int peer) const;
  // The failure a memory peer recorded in its segment (no system call: cheap enough per operation),
  // so that an operation does not start, and perhaps even complete, with a rank that already gave up.
  Status peerRecordedFailure(int peer) const;
  // Marks this rank failed so that memory peers waiting on it give up, and wakes them. Net peers
  // are told too when `notifyNet` (only from the thread that drives the connections). `waitsOn`: the
  // rank this one gave up waiting for, when it timed out (peers follow such notices to the rank that
  // stopped); -1 for a failure of its own.
  void markFailed(const std::string& reason, bool notifyNet, int waitsOn = -1);
  // What `peer` told this rank about its failure, if it did (the segment of a memory peer; a notice
  // that arrived behind the messages before it on a network connection).
  struct PeerNotice {
    bool failed = false;
    int waitsOn = -1;  // >= 0: the peer timed out waiting on that rank
    std::string reason;
  };
  PeerNotice peerNotice(int peer) const;
  // Whether `peer` said goodbye (closeNet: it closed its communicator normally); only network peers say so.
  bool peerClosed(int peer) const;
  // The error a notice stands for (Ok when the peer has not failed): loomTimeout when the peer gave up
  // waiting on another rank, loomRemoteError otherwise.
  Status noticeError(int peer, const PeerNotice& notice) const;
  // A normal close (loomCommDestroy of a healthy communicator): tells every network peer this rank is
  // done and keeps the connections until each peer said the same, or `maxWaitMs` passed. A peer says
  // so only once its own operations ended, so by then it has read all this rank sent; closing sooner
  // can reset a connection whose last bytes the peer has not read yet (TCP answers data that reaches
  // a closed socket with a reset, and the reset drops what was still queued), which a slow or lossy
  // link makes likely.
  void closeNet(int64_t maxWaitMs);
  // This rank's CPU while it waits, published in its segment; and a memory peer's (0 when none).
  void publishWaitingCpu(uint64_t stampedCpu) const {
    if (own_) own_->header()->waitingCpu.store(stampedCpu, std::memory_order_relaxed);
  }
  uint64_t peerWaitingCpu(int peer) const {
    const auto& seg = peerSegments_[static_cast<size_t>(peer)];
    return seg ? seg->header()->waitingCpu.load(std::memory_order_relaxed) : 0;
  }
  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  std::string describePeer(int peer) const;
  // The network provider's name ("" without net peers) and what left by which path (net/net_connection.h).
  std::string netProviderName() const;
  const net::SendCounters& netSendCounters() const { return netCounters_; }
  // Whether GPUDirect RDMA could serve this rank's GPU on its NIC, and why (decided at setup for a
  // rank with a GPU and network peers; Staged otherwise).
  const net::GdrChoice& gdrChoice() const { return gdr_; }
  // Plan kernels' network lanes (net/fifo_proxy.h): a proxy over a provider instance of its own, on
  // the device the host connections use (LOOM_NET, LOOM_SOCKET_IFNAME, the topology's NIC).
  // Collective: every rank calls it, a rank without network peers with empty tables; a rank that
  // could not make its FIFOs passes why (`localError`), and every rank fails with it.
  Status startFifoProxy(PeerExchange& exchange, net::ProxiedFifos fifos, const Status& localError,
                        std::function<void(int peer, const Status&)> onFailure, std::unique_ptr<net::FifoProxy>* out) const;

 private:
  TransportSet() = default;
  size_t index(int peer, int channel) const { return static_cast<size_t>(peer) * channels_ + channel; }
  Status setupMemory(PeerExchange& exchange);
  std::unique_ptr<SendConnection> makeMemorySend(int peer, int channel) const;
  std::unique_ptr<RecvConnection> makeMemoryRecv(int peer, int channel) const;
  Status setupNet(PeerExchange& exchange);
  // Network connections made, one peer's every channel (recvs first: a send in its slot says all are).
  void putNetConnections(int peer, net::NetPairing::Connections made) const;
  // One step of the pairing with `peer` (pairingMutex_ held), its connections put in their slots once made.
  Status advancePairLocked(int peer, bool* up) const;
  Status chooseNetDevice(const net::Provider& provider, int* device) const;
  Status chooseGdr(const net::DeviceProperties& props);
  PeerNotice segmentNotice(int peer) const;  // a memory peer's failure record
  std::vector<net::NetSendConnection*> netSends() const;
  // The connections made so far (a send or a receive per channel) to the peers of the kinds `which` takes.
  int madeConnections(bool (*which)(TransportKind)) const;
  std::vector<int> memoryPeersOf(int rank) const;

  int rank_ = 0;
  int nranks_ = 1;
  TransportOptions options_;
  int channels_ = 2;  // nchannels() + the point-to-point channel
  std::vector<ProcessIdentity> peers_;
  std::vector<TransportKind> kinds_;
  bool hasNetPeers_ = false;
  // Outlives the connections: their comms need it until they are gone (close()).
  std::unique_ptr<net::Provider> netProvider_;
  net::SendCounters netCounters_;
  net::GdrChoice gdr_;
  // Network connections on first use (null with LOOM_NET_CONNECT=eager or without network peers); its
  // lock is taken only to connect, never once a peer's connections are made.
  std::unique_ptr<net::NetPairing> pairing_;
  mutable std::mutex pairingMutex_;
  PeerExchange* exchange_ = nullptr;  // the communicator's bootstrap, which outlives this set
  LazySlots<SendConnection> sends_;  // indexed by index(peer, channel)
  LazySlots<RecvConnection> recvs_;
  std::shared_ptr<Segment> own_;
  std::vector<std::shared_ptr<Segment>> peerSegments_;  // indexed by rank; null when not a memory peer
  // A memory peer's place among this rank's memory peers (its FIFOs' place in this rank's segment),
  // indexed by rank; -1 for the others. This rank's memory peers are its host's other ranks, and so
  // are each memory peer's: as many of them (memoryPeers_), this rank's place among the peer's being
  // its place among its host's ranks (hostRanksBelow_) less one where the peer comes before it.
  std::vector<int> memoryIndex_;
  size_t memoryPeers_ = 0;
  size_t hostRanksBelow_ = 0;
  std::vector<int> pidfds_;  // per rank, for shm peers: readable once the process has exited
  std::unique_ptr<Doorbell> privateBell_;
  Doorbell* bell_ = nullptr;
};

}  // namespace loom
