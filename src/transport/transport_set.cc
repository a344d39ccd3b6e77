#include "transport/transport_set.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <type_traits>

#include "base/clock.h"
#include "base/log.h"
#include "base/process_exit.h"
#include "transport/memory_fifo.h"
#include "transport/net/net_setup.h"
#include "transport/net/provider_choice.h"

namespace loom {

const char* transportKindName(TransportKind kind) {
  switch (kind) {
    case TransportKind::Self: return "self";
    case TransportKind::Local: return "local";
    case TransportKind::Shm: return "shm";
    case TransportKind::Net: return "net";
  }
  return "?";
}

TransportKind selectTransport(const ProcessIdentity& a, const ProcessIdentity& b, const std::string& forced) {
  if (forced == "net" || forced == "socket" || !a.sameHost(b)) return TransportKind::Net;
  if (forced == "shm" || !a.sameProcess(b)) return TransportKind::Shm;
  return TransportKind::Local;
}

namespace {

// What each rank tells the others about its segment.
struct SegmentDescriptor {
  uint64_t holder = 0;  // address of a std::shared_ptr<Segment> in the owner's process (local peers)
  uint64_t bytes = 0;
  char name[64] = {0};  // shared memory name (shm peers); empty when the segment is process memory
};

bool isMemory(TransportKind k) { return k == TransportKind::Local || k == TransportKind::Shm; }

}  // namespace

void TransportSet::close() {
  {
    std::lock_guard<std::mutex> lock(pairingMutex_);
    pairing_.reset();  // its half-made comms use the provider
  }
  recvs_.clear();
  sends_.clear();
  netProvider_.reset();
}

TransportSet::~TransportSet() {
  close();
  for (int fd : pidfds_)
    if (fd >= 0) ::close(fd);
  if (hasNetPeers_)
    LOOM_INFO(Net, "rank {}: sent {} bytes over the network straight from the caller's buffers, {} through slots",
              rank_, netCounters_.direct, netCounters_.slots);
}

std::vector<int> TransportSet::memoryPeersOf(int rank) const {
  std::vector<int> list;
  for (int q = 0; q < nranks_; ++q)
    if (q != rank && isMemory(selectTransport(peers_[rank], peers_[q], options_.forced))) list.push_back(q);
  return list;
}

bool TransportSet::hasPeerInThisProcess() const {
  for (int q = 0; q < nranks_; ++q)
    if (q != rank_ && peers_[q].sameProcess(peers_[rank_])) return true;
  return false;
}

std::string TransportSet::describePeer(int peer) const {
  if (kinds_[peer] == TransportKind::Net && netProvider_)
    return fmt::format("rank {} ({} pid {}, net:{})", peer, peers_[peer].host(), peers_[peer].pid, netProvider_->name());
  return fmt::format("rank {} ({} pid {}, {})", peer, peers_[peer].host(), peers_[peer].pid,
                     transportKindName(kinds_[peer]));
}

std::string TransportSet::netProviderName() const { return netProvider_ ? netProvider_->name() : ""; }

Status TransportSet::create(PeerExchange& exchange, const std::vector<ProcessIdentity>& peers,
                            const TransportOptions& options, std::unique_ptr<TransportSet>* out) {
  std::unique_ptr<TransportSet> t(new TransportSet());
  t->rank_ = exchange.rank();
  t->nranks_ = exchange.nranks();
  t->options_ = options;
  t->channels_ = options.nchannels + 1;  // the collectives' channels and the point-to-point one
  t->peers_ = peers;
  if (options.nslots < 2 || options.nslots > kMaxFifoSlots)
    return invalidArgument("LOOM_FIFO_SLOTS must be within 2..{}", kMaxFifoSlots);
  t->kinds_.resize(t->nranks_);
  for (int p = 0; p < t->nranks_; ++p) {
    t->kinds_[p] = p == t->rank_ ? TransportKind::Self : selectTransport(peers[t->rank_], peers[p], options.forced);
    if (t->kinds_[p] == TransportKind::Net) t->hasNetPeers_ = true;
  }
  size_t slots = static_cast<size_t>(t->nranks_) * t->channels_;
  t->sends_.reset(slots);
  t->recvs_.reset(slots);
  t->peerSegments_.resize(t->nranks_);
  t->pidfds_.assign(t->nranks_, -1);
  for (int p = 0; p < t->nranks_; ++p)
    if (t->kinds_[p] == TransportKind::Shm) t->pidfds_[p] = openPidfd(peers[p].pid);
  LOOM_TRY(t->setupMemory(exchange).withContext("shared-memory setup"));
  LOOM_TRY(t->setupNet(exchange).withContext("network setup"));
  if (!t->bell_) {
    t->privateBell_ = std::make_unique<Doorbell>();
    t->bell_ = t->privateBell_.get();
  }
  *out = std::move(t);
  return Status::Ok();
}

int TransportSet::madeConnections(bool (*which)(TransportKind)) const {
  int made = 0;
  for (int p = 0; p < nranks_; ++p)
    if (which(kinds_[p]))
      for (int c = 0; c < channels_; ++c) made += (sends_.get(index(p, c)) ? 1 : 0) + (recvs_.get(index(p, c)) ? 1 : 0);
  return made;
}

int TransportSet::openNetConnections() const {
  return madeConnections([](TransportKind k) { return k == TransportKind::Net; });
}

int TransportSet::madeMemoryConnections() const { return madeConnections(isMemory); }

Status TransportSet::setupMemory(PeerExchange& exchange) {
  std::vector<int> mine = memoryPeersOf(rank_);
  SegmentLayout layout{0, options_.nslots, options_.slotBytes};
  SegmentDescriptor desc;
  std::shared_ptr<Segment>* holder = nullptr;
  if (!mine.empty()) {
    bool anyShm = std::any_of(mine.begin(), mine.end(), [&](int p) { return kinds_[p] == TransportKind::Shm; });
    layout.nfifos = mine.size() * channels_;
    LOOM_TRY(Segment::create(layout.totalBytes(), anyShm, &own_));
    if (options_.placeMemory) options_.placeMemory(own_->base(), layout.totalBytes());
    // No FIFO is written here: a fresh mapping reads as zeros, which is every FifoControl's initial
    // state (an aggregate of zeroed counters), so a FIFO no plan uses costs no page. Writing them all
    // made every rank fault in a page per peer and channel at init: O(n) per rank, the most of a
    // 256-rank init (docs/PERFORMANCE.md, "Init").
    static_assert(std::is_aggregate_v<FifoControl>, "FifoControl must be valid as zeroed memory");
    holder = new std::shared_ptr<Segment>(own_);
    desc.holder = reinterpret_cast<uint64_t>(holder);
    desc.bytes = layout.totalBytes();
    std::snprintf(desc.name, sizeof(desc.name), "%s", own_->name().c_str());
    bell_ = &own_->header()->bell;
  }
  std::vector<SegmentDescriptor> all(nranks_);
  Status st = exchange.allGather(&desc, all.data(), sizeof(desc));
  for (size_t i = 0; st.ok() && i < mine.size(); ++i) {
    int p = mine[i];
    if (kinds_[p] == TransportKind::Local) {
      peerSegments_[p] = *reinterpret_cast<std::shared_ptr<Segment>*>(all[p].holder);
    } else {
      st = Segment::open(all[p].name, all[p].bytes, &peerSegments_[p]).withContext(describePeer(p));
    }
  }
  // Every peer has mapped (or failed to map) our segment after this: the name can go.
  Status barrier = exchange.barrier();
  delete holder;
  if (own_) own_->unlinkName();
  LOOM_TRY(st);
  LOOM_TRY(barrier);
  memoryIndex_.assign(static_cast<size_t>(nranks_), -1);
  for (size_t i = 0; i < mine.size(); ++i) memoryIndex_[static_cast<size_t>(mine[i])] = static_cast<int>(i);
  memoryPeers_ = mine.size();
  hostRanksBelow_ = static_cast<size_t>(std::lower_bound(mine.begin(), mine.end(), rank_) - mine.begin());
  return Status::Ok();
}

std::unique_ptr<SendConnection> TransportSet::makeMemorySend(int peer, int channel) const {
  if (memoryIndex_[static_cast<size_t>(peer)] < 0) return nullptr;  // itself, or a network peer
  Segment& theirs = *peerSegments_[static_cast<size_t>(peer)];
  const SegmentLayout their{memoryPeers_ * channels_, options_.nslots, options_.slotBytes};
  const size_t fifo = (hostRanksBelow_ - (peer < rank_ ? 1 : 0)) * channels_ + channel;
  const FifoView out{reinterpret_cast<FifoControl*>(theirs.base() + their.controlOffset(fifo)),
                     theirs.base() + their.slotsOffset(fifo), options_.nslots, options_.slotBytes};
  return std::make_unique<MemorySendConnection>(out, &theirs.header()->bell);
}

std::unique_ptr<RecvConnection> TransportSet::makeMemoryRecv(int peer, int channel) const {
  if (memoryIndex_[static_cast<size_t>(peer)] < 0) return nullptr;  // itself, or a network peer
  Segment& theirs = *peerSegments_[static_cast<size_t>(peer)];
  const SegmentLayout layout{memoryPeers_ * channels_, options_.nslots, options_.slotBytes};
  const size_t fifo = static_cast<size_t>(memoryIndex_[static_cast<size_t>(peer)]) * channels_ + channel;
  const FifoView in{reinterpret_cast<FifoControl*>(own_->base() + layout.controlOffset(fifo)),
                    own_->base() + layout.slotsOffset(fifo), options_.nslots, options_.slotBytes};
  return std::make_unique<MemoryRecvConnection>(in, &theirs.header()->bell, peer);
}

Status TransportSet::chooseNetDevice(const net::Provider& provider, int* device) const {
  const net::PreferredNic& nic = options_.netPreferred;
  const std::string spec = provider.interfaceNamedDevices() ? options_.netDevice : "";
  if (!spec.empty() || (nic.name.empty() && nic.busId.empty())) return net::chooseDevice(provider, spec, device);
  *device = net::findDevice(provider, nic);
  if (*device >= 0) return Status::Ok();
  LOOM_INFO(Net, "rank {}: network provider {} has no device for the topology's NIC {} ({}); taking its first",
            rank_, provider.name(), nic.name, nic.busId.empty() ? "no PCI address" : nic.busId);
  return net::chooseDevice(provider, "", device);
}

Status TransportSet::startFifoProxy(PeerExchange& exchange, net::ProxiedFifos fifos, const Status& localError,
                                   std::function<void(int peer, const Status&)> onFailure,
                                   std::unique_ptr<net::FifoProxy>* out) const {
  std::unique_ptr<net::Provider> provider;
  Status providerError = localError;
  if (providerError.ok()) providerError = net::makeProvider({options_.netProvider, options_.netDevice}, &provider);
  int device = 0;
  if (providerError.ok()) providerError = chooseNetDevice(*provider, &device);
  if (!providerError.ok()) provider.reset();
  return net::FifoProxy::start(exchange, std::move(provider), providerError, device, std::move(fifos),
                               options_.timeoutMs, std::move(onFailure), out);
}

Status TransportSet::setupNet(PeerExchange& exchange) {
  if (!hasNetPeers_) return Status::Ok();
  // A rank whose provider fails still joins the handle exchange, so that every rank reports it.
  Status providerError = net::makeProvider({options_.netProvider, options_.netDevice}, &netProvider_);
  int device = 0;
  net::DeviceProperties props;
  if (providerError.ok()) providerError = chooseNetDevice(*netProvider_, &device);
  if (providerError.ok()) providerError = netProvider_->deviceProperties(device, &props);
  if (providerError.ok() && options_.cudaDevice >= 0) providerError = chooseGdr(props);
  if (!providerError.ok()) netProvider_.reset();
  exchange_ = &exchange;
  net::NetLinks links;
  links.nchannels = channels_;
  links.nslots = options_.nslots;
  links.slotBytes = options_.slotBytes;
  links.direct = options_.netDirect ? net::directModeFor(props) : net::DirectMode::None;
  links.timeoutMs = options_.timeoutMs;
  if (!options_.netConnectEager) {
    // Connections on first use: every rank only agrees here that each one's provider started, so that
    // a rank whose provider failed is named at init by all, not later by the peers that reach it.
    LOOM_TRY(net::agreeOnNetOutcome(exchange, providerError));
    pairing_ = std::make_unique<net::NetPairing>(&exchange, netProvider_.get(), device, links, &netCounters_);
    LOOM_INFO(Net, "rank {}: network provider {} on device {} ({} Mb/s), sends {}; connections made on first use",
              rank_, netProvider_->name(), props.name, props.speedMbps,
              links.direct == net::DirectMode::None ? "through slots" : "straight from buffers");
    return Status::Ok();
  }
  std::vector<bool> netPeers(nranks_);
  for (int p = 0; p < nranks_; ++p) netPeers[p] = kinds_[p] == TransportKind::Net;
  std::vector<std::unique_ptr<SendConnection>> sends(sends_.size());
  std::vector<std::unique_ptr<RecvConnection>> recvs(recvs_.size());
  LOOM_TRY(net::connectNetPeers(exchange, netProvider_.get(), providerError, device, netPeers, links, &netCounters_,
                                &sends, &recvs));
  for (size_t i = 0; i < sends.size(); ++i) {
    if (sends[i]) sends_.put(i, std::move(sends[i]));
    if (recvs[i]) recvs_.put(i, std::move(recvs[i]));
  }
  LOOM_INFO(Net, "rank {}: network provider {} on device {} ({} Mb/s), sends {}", rank_, netProvider_->name(),
            props.name, props.speedMbps, links.direct == net::DirectMode::None ? "through slots" : "straight from buffers");
  return Status::Ok();
}

void TransportSet::putNetConnections(int peer, net::NetPairing::Connections made) const {
  for (int c = 0; c < channels_; ++c) recvs_.put(index(peer, c), std::move(made.recvs[static_cast<size_t>(c)]));
  for (int c = 0; c < channels_; ++c) sends_.put(index(peer, c), std::move(made.sends[static_cast<size_t>(c)]));
}

Status TransportSet::advancePairLocked(int peer, bool* up) const {
  net::NetPairing::Connections made;
  LOOM_TRY(pairing_->advance(peer, &made, up).withContext(describePeer(peer)));
  if (!made.sends.empty()) putNetConnections(peer, std::move(made));
  return Status::Ok();
}

Status TransportSet::connectNet(int peer, bool* up) const {
  *up = netConnected(peer);
  if (*up) return Status::Ok();
  std::lock_guard<std::mutex> lock(pairingMutex_);
  if (!pairing_) return internalError("{}: no network connection and none to make", describePeer(peer));
  return advancePairLocked(peer, up);
}

Status TransportSet::probeNetPeer(int peer) const {
  if (!exchange_) return Status::Ok();
  return exchange_->probePeer(peer).withContext(describePeer(peer));
}

Status TransportSet::answerNetPeers() const {
  std::lock_guard<std::mutex> lock(pairingMutex_);
  if (!pairing_) return Status::Ok();
  std::vector<int> asked;
  LOOM_TRY(pairing_->peersToAnswer(&asked));
  for (int peer : asked) {
    if (peer < 0 || peer >= nranks_ || kinds_[peer] != TransportKind::Net) continue;  // not a network peer: ignored
    bool up = false;
    LOOM_TRY(advancePairLocked(peer, &up));
  }
  return Status::Ok();
}

Status TransportSet::chooseGdr(const net::DeviceProperties& props) {
  net::GdrLevel level;
  LOOM_TRY(net::gdrLevelFromEnvironment(&level));
  net::GdrFacts facts;
  facts.nic = props.name;
  const net::PreferredNic& nic = options_.netPreferred;
  const bool topologysNic =
      props.name == nic.name || (!nic.busId.empty() && props.pciPath.find(nic.busId) != std::string::npos);
  facts.gpuNicPath = topologysNic ? nic.gpuPath : -1;  // another device: its distance is unknown
  facts.ptrSupport = props.ptrSupport;
  facts.cudaDmabuf = options_.cudaDmabuf;
  facts.cudaDmabufWhy = options_.cudaDmabufWhy;
  gdr_ = net::chooseGdr(facts, level);
  // Where plan kernels' network lanes keep their slots (device/net_lane_fifos.h).
  LOOM_INFO(Net, "rank {}: GPU {} and {}: {} ({})", rank_, options_.cudaDevice, props.name,
            net::gdrModeName(gdr_.mode), gdr_.why);
  return Status::Ok();
}

TransportSet::PeerNotice TransportSet::segmentNotice(int peer) const {
  PeerNotice n;
  const std::shared_ptr<Segment>& seg = peerSegments_[peer];
  if (!seg || seg->header()->state.load(std::memory_order_acquire) == static_cast<uint32_t>(SegmentState::Alive)) return n;
  n.failed = true;
  n.waitsOn = seg->header()->waitsOn;
  n.reason.assign(seg->header()->reason, strnlen(seg->header()->reason, sizeof(seg->header()->reason)));
  return n;
}

Status TransportSet::noticeError(int peer, const PeerNotice& notice) const {
  if (!notice.failed) return Status::Ok();
  return errorStatus(notice.waitsOn >= 0 ? loomTimeout : loomRemoteError, "{} failed: {}", describePeer(peer),
                     notice.reason.empty() ? "aborted" : notice.reason);
}

Status TransportSet::peerRecordedFailure(int peer) const { return noticeError(peer, segmentNotice(peer)); }

Status TransportSet::peerHealth(int peer) const {
  if (!netConnected(peer)) {
    // Not connected yet: while this rank waits for the peer's answer, a refused probe says it is gone.
    std::lock_guard<std::mutex> lock(pairingMutex_);
    if (!pairing_ || !pairing_->pending(peer)) return Status::Ok();
    return probeNetPeer(peer);
  }
  if (kinds_[peer] == TransportKind::Net) {
    // A peer that closed normally said so behind its last message on every connection; the goodbye
    // on one can arrive while another still carries its data (a large send on the point-to-point
    // channel), so it counts only once every connection has it. A failure notice counts at once.
    int closed = 0;
    for (int c = 0; c < channels_; ++c) {
      auto* rc = static_cast<net::NetRecvConnection*>(recvs_.get(index(peer, c)));
      int waitsOn = -1;
      std::string reason;
      if (rc->notice(&waitsOn, &reason) && waitsOn == net::kClosingNotice) {
        ++closed;
        continue;
      }
      if (Status st = rc->peerFailure(); !st.ok()) return st.withContext(describePeer(peer));
    }
    if (closed == channels_) return recvs_.get(index(peer, 0))->peerFailure().withContext(describePeer(peer));
    return Status::Ok();
  }
  if (!peerSegments_[peer]) return Status::Ok();
  // A recorded failure names its cause (often another rank), so it wins over a later exit.
  LOOM_TRY(peerRecordedFailure(peer));
  if (kinds_[peer] == TransportKind::Shm && processExited(peers_[peer].pid, pidfds_[peer]))
    return errorStatus(loomRemoteError, "{} died (its process exited)", describePeer(peer));
  return Status::Ok();
}

TransportSet::PeerNotice TransportSet::peerNotice(int peer) const {
  PeerNotice n;
  if (peer == rank_) return n;
  if (kinds_[peer] != TransportKind::Net) return segmentNotice(peer);
  if (!netConnected(peer)) {
    // Not connected (connections on first use): a notice comes through the bootstrap, if at all.
    std::lock_guard<std::mutex> lock(pairingMutex_);
    if (pairing_) n.failed = pairing_->notice(peer, &n.waitsOn, &n.reason);
    return n;
  }
  for (int c = 0; c < channels_ && !n.failed; ++c)
    if (RecvConnection* r = recvs_.get(index(peer, c)))  // none yet: not connected
      n.failed = static_cast<net::NetRecvConnection*>(r)->notice(&n.waitsOn, &n.reason);
  return n;
}

bool TransportSet::peerClosed(int peer) const {
  if (peer == rank_ || kinds_[peer] != TransportKind::Net) return false;
  const PeerNotice n = peerNotice(peer);
  return n.failed && n.waitsOn == net::kClosingNotice;
}

std::vector<net::NetSendConnection*> TransportSet::netSends() const {
  std::vector<net::NetSendConnection*> sends;
  for (int p = 0; p < nranks_; ++p)
    if (kinds_[p] == TransportKind::Net)
      for (int c = 0; c < channels_; ++c)
        if (SendConnection* s = sends_.get(index(p, c))) sends.push_back(static_cast<net::NetSendConnection*>(s));
  return sends;
}

void TransportSet::closeNet(int64_t maxWaitMs) {
  if (!hasNetPeers_) return;
  const std::vector<net::NetSendConnection*> sends = netSends();
  std::vector<net::NetRecvConnection*> recvs;
  for (int p = 0; p < nranks_; ++p)
    // Ranks of this process (LOOM_TRANSPORT=net in tests) may be destroyed one after another by one
    // thread: waiting for them would only delay it.
    if (kinds_[p] == TransportKind::Net && !peers_[p].sameProcess(peers_[rank_]))
      for (int c = 0; c < channels_; ++c)
        if (RecvConnection* r = recvs_.get(index(p, c))) recvs.push_back(static_cast<net::NetRecvConnection*>(r));
  for (net::NetSendConnection* c : sends) c->postNotice("closed its communicator (loomCommDestroy)", net::kClosingNotice);
  net::drainNotices(sends, net::kNoticeDrainMs);
  const Deadline deadline = Deadline::afterMs(maxWaitMs);
  std::vector<bool> heard(recvs.size(), false);
  size_t missing = recvs.size();
  while (missing > 0 && !deadline.expired()) {
    WaitList waits;
    for (size_t i = 0; i < recvs.size(); ++i) {
      int waitsOn = 0;
      std::string reason;
      if (!heard[i] && recvs[i]->notice(&waitsOn, &reason)) heard[i] = true, --missing;
      if (!heard[i]) recvs[i]->addWaits(&waits);
    }
    if (missing == 0) break;
    const timespec ts{0, 2'000'000};
    ::ppoll(waits.fds.data(), waits.fds.size(), &ts, nullptr);
  }
  if (missing > 0)
    LOOM_INFO(Net, "rank {}: {} network connection(s) closed without the peer's goodbye after {} ms", rank_, missing,
              maxWaitMs);
  for (net::NetSendConnection* c : sends) c->letGo();
}

void TransportSet::markFailed(const std::string& reason, bool notifyNet, int waitsOn) {
  if (notifyNet && hasNetPeers_) {
    {
      // The network peers without connections (made on first use) hear it through the bootstrap: those
      // waiting for this rank's answer, and those looking for who stopped.
      std::lock_guard<std::mutex> lock(pairingMutex_);
      if (pairing_) {
        std::vector<int> unconnected;
        for (int p = 0; p < nranks_; ++p)
          if (!netConnected(p)) unconnected.push_back(p);
        pairing_->abandon(reason, waitsOn, unconnected);
      }
    }
    // Every peer at once: one bounded drain for all notices, not one per connection.
    const std::vector<net::NetSendConnection*> connections = netSends();
    for (net::NetSendConnection* c : connections) c->postNotice(reason, waitsOn);
    net::drainNotices(connections, net::kNoticeDrainMs);
    for (net::NetSendConnection* c : connections) c->letGo();
  }
  if (own_ && own_->header()->state.load() == static_cast<uint32_t>(SegmentState::Alive)) {
    std::snprintf(own_->header()->reason, sizeof(own_->header()->reason), "%s", reason.c_str());
    own_->header()->waitsOn = waitsOn;
    own_->header()->state.store(static_cast<uint32_t>(SegmentState::Failed), std::memory_order_release);
  }
  for (const auto& seg : peerSegments_)
    if (seg) ringDoorbell(&seg->header()->bell);
  ringDoorbell(bell_);
}

}  // namespace loom
