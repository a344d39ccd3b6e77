#include "transport/net/net_pairing.h"

#include <algorithm>
#include <cstring>

#include "base/clock.h"
#include "base/log.h"

namespace loom::net {

namespace {

// What an offer starts with: the provider's name (a mismatch is an error naming the rank) and whether
// the sender could listen; its handles follow (one per channel), or, when it could not, its reason.
struct OfferHeader {
  char provider[48] = {0};
  int32_t code = 0;  // loomSuccess, or why the sender gives up on this pair
};

}  // namespace

struct NetPairing::Pair {
  Stage stage = Stage::Idle;
  bool haveTheirs = false;  // the peer's offer came
  bool paired = false;      // every comm is up and this side joined each channel's two (Provider::pairComms)
  std::vector<std::unique_ptr<ListenComm>> listens;
  std::vector<Handle> theirs;  // the handles the peer listens on for this rank, per channel
  std::vector<std::unique_ptr<SendComm>> sends;
  std::vector<std::unique_ptr<RecvComm>> recvs;
  Status failure;

  // For good: what it holds goes, later advances return `why`.
  void fail(const Status& why) {
    stage = Stage::Failed;
    failure = why;
    listens.clear();
    sends.clear();
    recvs.clear();
  }
};

NetPairing::NetPairing(PeerExchange* exchange, Provider* provider, int device, const NetLinks& links,
                       SendCounters* counters)
    : exchange_(exchange), provider_(provider), device_(device), links_(links), counters_(counters) {}

NetPairing::~NetPairing() = default;

bool NetPairing::pending(int peer) const {
  auto it = pairs_.find(peer);
  return it != pairs_.end() && (it->second->stage == Stage::Offered || it->second->stage == Stage::Connecting);
}

Status NetPairing::tellFailure(int peer, const Status& why) {
  OfferHeader header;
  std::snprintf(header.provider, sizeof header.provider, "%s", provider_->name().c_str());
  header.code = why.code() == loomSuccess ? loomInternalError : why.code();
  std::vector<char> message(sizeof header + why.message().size());
  std::memcpy(message.data(), &header, sizeof header);
  std::memcpy(message.data() + sizeof header, why.message().data(), why.message().size());
  return exchange_->sendMessage(peer, kHostConnectionsTag, message.data(), message.size());
}

Status NetPairing::offer(int peer, Pair& pair) {
  const int nch = links_.nchannels;
  pair.listens.resize(static_cast<size_t>(nch));
  OfferHeader header;
  std::snprintf(header.provider, sizeof header.provider, "%s", provider_->name().c_str());
  std::vector<char> message(sizeof header + static_cast<size_t>(nch) * kHandleBytes);
  for (int c = 0; c < nch; ++c) {
    Handle handle;
    if (Status st = provider_->listen(device_, &handle, &pair.listens[static_cast<size_t>(c)]); !st.ok()) {
      st = st.withContext(fmt::format("listening for rank {}'s network connection (channel {})", peer, c));
      (void)tellFailure(peer, st);  // the peer fails naming this rank rather than waiting for it
      return st;
    }
    std::memcpy(message.data() + sizeof header + static_cast<size_t>(c) * kHandleBytes, handle.bytes.data(),
                kHandleBytes);
  }
  std::memcpy(message.data(), &header, sizeof header);
  return exchange_->sendMessage(peer, kHostConnectionsTag, message.data(), message.size())
      .withContext(fmt::format("offering rank {} this rank's network connections", peer));
}

Status NetPairing::peerGaveUp(int peer) {
  noticesTakenNs_ = 0;  // a failed peer sends a notice instead of what this rank waits for: look now
  int waitsOn = -1;
  std::string reason;
  if (!notice(peer, &waitsOn, &reason)) return Status::Ok();
  return errorStatus(waitsOn >= 0 ? loomTimeout : loomRemoteError, "rank {} failed before it connected to this rank: {}",
                     peer, reason);
}

Status NetPairing::takeOffer(int peer, Pair& pair, bool* taken) {
  *taken = false;
  std::vector<int> senders;
  LOOM_TRY(exchange_->arrivedFrom(kHostConnectionsTag, &senders));
  if (!std::binary_search(senders.begin(), senders.end(), peer)) return peerGaveUp(peer);
  std::vector<char> theirs;
  LOOM_TRY(exchange_->recvMessage(peer, kHostConnectionsTag, &theirs));  // it came: no wait
  OfferHeader header;
  if (theirs.size() < sizeof header)
    return errorStatus(loomInternalError, "rank {} offered network connections in {} bytes", peer, theirs.size());
  std::memcpy(&header, theirs.data(), sizeof header);
  header.provider[sizeof header.provider - 1] = '\0';
  if (header.code != loomSuccess)
    return errorStatus(loomRemoteError, "rank {} gave up connecting to this rank over the network: {}", peer,
                       std::string(theirs.data() + sizeof header, theirs.size() - sizeof header));
  if (provider_->name() != header.provider)
    return errorStatus(loomInvalidUsage, "rank {} uses network provider '{}' and this rank '{}' (LOOM_NET must agree)",
                       peer, header.provider, provider_->name());
  const size_t expected = sizeof header + static_cast<size_t>(links_.nchannels) * kHandleBytes;
  if (theirs.size() != expected)
    return errorStatus(loomInvalidUsage, "rank {} offered {} bytes of network handles where {} were expected (its "
                       "channels differ: LOOM_NCHANNELS must agree)", peer, theirs.size(), expected);
  pair.theirs.resize(static_cast<size_t>(links_.nchannels));
  for (int c = 0; c < links_.nchannels; ++c)
    std::memcpy(pair.theirs[static_cast<size_t>(c)].bytes.data(),
                theirs.data() + sizeof header + static_cast<size_t>(c) * kHandleBytes, kHandleBytes);
  *taken = true;
  return Status::Ok();
}

Status NetPairing::drive(int peer, Pair& pair, Connections* made, bool* up) {
  const size_t nch = static_cast<size_t>(links_.nchannels);
  pair.sends.resize(nch);
  pair.recvs.resize(nch);
  bool all = true;
  for (size_t c = 0; c < nch; ++c) {
    const std::string where = fmt::format("rank {} (channel {})", peer, c);
    if (!pair.sends[c]) LOOM_TRY(provider_->connect(device_, &pair.theirs[c], &pair.sends[c]).withContext("connecting to " + where));
    if (!pair.recvs[c]) {
      LOOM_TRY(pair.listens[c]->accept(&pair.recvs[c]).withContext("accepting from " + where));
      if (pair.recvs[c]) pair.listens[c].reset();
    }
    all = all && pair.sends[c] && pair.recvs[c];
  }
  if (!all) return peerGaveUp(peer);
  // Provider::pairComms joins a channel's two comms only while neither side sent anything: each side
  // joins its own, then says so, and a side sends only once the other said it (the socket provider then
  // carries each direction's acknowledgements with the other's messages: 8 B across hosts took 15%
  // longer without).
  if (!pair.paired) {
    for (size_t c = 0; c < nch; ++c) provider_->pairComms(*pair.sends[c], *pair.recvs[c]);
    LOOM_TRY(exchange_->sendMessage(peer, kNetPairedTag, nullptr, 0).withContext(fmt::format("telling rank {} its "
                                                                                             "connections are up", peer)));
    pair.paired = true;
  }
  std::vector<int> senders;
  LOOM_TRY(exchange_->arrivedFrom(kNetPairedTag, &senders));
  if (!std::binary_search(senders.begin(), senders.end(), peer)) return peerGaveUp(peer);
  std::vector<char> empty;
  LOOM_TRY(exchange_->recvMessage(peer, kNetPairedTag, &empty));  // it came: no wait
  made->sends.resize(nch);
  made->recvs.resize(nch);
  for (size_t c = 0; c < nch; ++c) {
    std::unique_ptr<NetSendConnection> send;
    LOOM_TRY(NetSendConnection::create(std::move(pair.sends[c]), links_.nslots, links_.slotBytes, peer, links_.direct,
                                       counters_, &send));
    made->sends[c] = std::move(send);
    std::unique_ptr<NetRecvConnection> recv;
    LOOM_TRY(NetRecvConnection::create(std::move(pair.recvs[c]), links_.nslots, links_.slotBytes, peer, &recv));
    made->recvs[c] = std::move(recv);
  }
  pair.stage = Stage::Up;
  pair.listens.clear();
  pair.theirs.clear();
  *up = true;
  return Status::Ok();
}

Status NetPairing::advance(int peer, Connections* made, bool* up) {
  *up = false;
  std::unique_ptr<Pair>& slot = pairs_[peer];
  if (!slot) slot = std::make_unique<Pair>();
  Pair& pair = *slot;
  Status st;
  switch (pair.stage) {
    case Stage::Up:
      *up = true;
      return Status::Ok();
    case Stage::Failed:
      return pair.failure;
    case Stage::Idle:
      st = offer(peer, pair);
      if (!st.ok()) break;
      pair.stage = Stage::Offered;
      [[fallthrough]];
    case Stage::Offered:
      st = takeOffer(peer, pair, &pair.haveTheirs);
      if (!st.ok() || !pair.haveTheirs) break;
      pair.stage = Stage::Connecting;
      [[fallthrough]];
    case Stage::Connecting:
      st = drive(peer, pair, made, up);
      break;
  }
  if (!st.ok()) pair.fail(st);
  return st;
}

Status NetPairing::peersToAnswer(std::vector<int>* peers) {
  LOOM_TRY(exchange_->arrivedFrom(kHostConnectionsTag, peers));
  for (const auto& [peer, pair] : pairs_)
    if (pair->stage == Stage::Offered || pair->stage == Stage::Connecting) peers->push_back(peer);
  std::sort(peers->begin(), peers->end());
  peers->erase(std::unique(peers->begin(), peers->end()), peers->end());
  std::erase_if(*peers, [&](int q) {
    auto it = pairs_.find(q);
    return it != pairs_.end() && (it->second->stage == Stage::Up || it->second->stage == Stage::Failed);
  });
  return Status::Ok();
}

void NetPairing::abandon(const std::string& reason, int waitsOn, const std::vector<int>& unconnected) {
  const std::vector<char> message = encodeNetNotice(waitsOn, reason);
  exchange_->tellEach(unconnected, kNetNoticeTag, message.data(), message.size(), kNoticeDrainMs);
  const Status why = errorStatus(loomRemoteError, "this rank failed: {}", reason);
  for (auto& [peer, pair] : pairs_)
    if (pair->stage != Stage::Up) pair->fail(why);
}

void NetPairing::takeNotices() {
  std::vector<int> senders;
  if (!exchange_->arrivedFrom(kNetNoticeTag, &senders).ok()) return;
  for (int peer : senders) {
    std::vector<char> message;
    Notice n;
    if (exchange_->recvMessage(peer, kNetNoticeTag, &message).ok() && decodeNetNotice(message, &n.waitsOn, &n.reason))
      notices_[peer] = std::move(n);
  }
}

bool NetPairing::notice(int peer, int* waitsOn, std::string* reason) {
  // Taking them polls the bootstrap's listener: at most once a millisecond, however many peers are asked about.
  const uint64_t now = nowNs();
  if (now - noticesTakenNs_ > 1'000'000) {
    noticesTakenNs_ = now;
    takeNotices();
  }
  auto it = notices_.find(peer);
  if (it == notices_.end()) return false;
  *waitsOn = it->second.waitsOn;
  if (reason) *reason = it->second.reason;
  return true;
}

}  // namespace loom::net
