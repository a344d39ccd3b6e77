#include "transport/net/net_setup.h"

#include <time.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "base/clock.h"
#include "base/log.h"
#include "base/socket.h"

namespace loom::net {

namespace {

// What each rank tells a peer before its handles.
struct RecordHeader {
  char provider[48] = {0};
};

void nap(int64_t us) {
  const timespec ts{0, static_cast<long>(us) * 1000};
  nanosleep(&ts, nullptr);
}

std::string rankList(const std::vector<int>& ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size() && i < 8; ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > 8) text += fmt::format(" and {} more", ranks.size() - 8);
  return text;
}

}  // namespace

Status chooseDevice(const Provider& provider, const std::string& spec, int* device) {
  std::vector<std::string> names;
  for (int d = 0; d < provider.deviceCount(); ++d) {
    DeviceProperties props;
    LOOM_TRY(provider.deviceProperties(d, &props));
    if (interfaceMatches(spec, props.name.c_str())) {
      *device = d;
      return Status::Ok();
    }
    names.push_back(props.name);
  }
  std::string all;
  for (const std::string& n : names) all += (all.empty() ? "" : ", ") + n;
  return invalidArgument("network provider '{}' has no device matching '{}' (it has: {})", provider.name(), spec,
                         all.empty() ? "none" : all);
}

int findDevice(const Provider& provider, const PreferredNic& nic) {
  auto lower = [](std::string s) {
    for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return s;
  };
  const std::string bus = lower(nic.busId);
  for (int d = 0; d < provider.deviceCount(); ++d) {
    DeviceProperties props;
    if (!provider.deviceProperties(d, &props).ok()) continue;
    if (!nic.name.empty() && props.name == nic.name) return d;
    const size_t slash = props.pciPath.rfind('/');
    if (!bus.empty() && slash != std::string::npos && lower(props.pciPath.substr(slash + 1)) == bus) return d;
  }
  return -1;
}

std::vector<char> encodeNetNotice(int waitsOn, const std::string& reason) {
  const int32_t on = waitsOn;
  std::vector<char> message(sizeof on + reason.size());
  std::memcpy(message.data(), &on, sizeof on);
  std::memcpy(message.data() + sizeof on, reason.data(), reason.size());
  return message;
}

bool decodeNetNotice(const std::vector<char>& message, int* waitsOn, std::string* reason) {
  int32_t on = -1;
  if (message.size() < sizeof on) return false;
  std::memcpy(&on, message.data(), sizeof on);
  *waitsOn = on;
  reason->assign(message.data() + sizeof on, message.size() - sizeof on);
  return true;
}

Status agreeOnNetOutcome(PeerExchange& exchange, const Status& mine) {
  const int32_t code = mine.code();
  std::vector<int32_t> codes(static_cast<size_t>(exchange.nranks()));
  LOOM_TRY(exchange.allGather(&code, codes.data(), sizeof code).withContext("agreeing on the network setup"));
  return shareFailure(exchange, codes, mine, "could not set up its network", "agreeing on the network setup");
}

namespace {

// Drives every connect and accept of connectNetComms until all are up, the deadline passes, or a peer
// says it failed (a notice through the exchange: it will not connect; then *peerFailed).
Status driveConnections(PeerExchange& exchange, Provider* provider, int device, const std::vector<bool>& peers, int nch,
                        int64_t timeoutMs, std::vector<std::unique_ptr<ListenComm>>& listens,
                        std::vector<Handle>& connectHandles, std::vector<std::unique_ptr<SendComm>>* sends,
                        std::vector<std::unique_ptr<RecvComm>>* recvs, bool* peerFailed) {
  const int nranks = exchange.nranks();
  *peerFailed = false;
  int missing = 0;
  for (int q = 0; q < nranks; ++q)
    if (peers[q]) missing += 2 * nch;
  const Deadline deadline = Deadline::afterMs(timeoutMs);
  int64_t napUs = 20;
  uint64_t noticesLookedNs = nowNs();
  while (missing > 0) {
    bool progressed = false;
    for (int q = 0; q < nranks; ++q)
      for (int c = 0; peers[q] && c < nch; ++c) {
        const size_t i = static_cast<size_t>(q) * nch + c;
        const std::string where = fmt::format("rank {} (channel {})", q, c);
        if (!(*sends)[i]) {
          LOOM_TRY(provider->connect(device, &connectHandles[i], &(*sends)[i]).withContext("connecting to " + where));
          if ((*sends)[i]) {
            progressed = true;
            --missing;
          }
        }
        if (!(*recvs)[i]) {
          LOOM_TRY(listens[i]->accept(&(*recvs)[i]).withContext("accepting from " + where));
          if ((*recvs)[i]) {
            listens[i].reset();
            progressed = true;
            --missing;
          }
        }
      }
    if (progressed) {
      napUs = 20;
      continue;
    }
    if (nowNs() - noticesLookedNs > 100'000'000) {
      noticesLookedNs = nowNs();
      std::vector<int> failed;
      LOOM_TRY(exchange.arrivedFrom(kNetNoticeTag, &failed));
      for (int q : failed) {
        if (q < 0 || q >= nranks || !peers[q]) continue;
        std::vector<char> notice;
        LOOM_TRY(exchange.recvMessage(q, kNetNoticeTag, &notice));
        int waitsOn = -1;
        std::string reason;
        (void)decodeNetNotice(notice, &waitsOn, &reason);  // a short one fails the setup all the same
        *peerFailed = true;
        return errorStatus(loomRemoteError, "{}", reason);
      }
    }
    if (deadline.expired()) {
      std::vector<int> late;
      for (int q = 0; q < nranks; ++q)
        for (int c = 0; peers[q] && c < nch; ++c) {
          const size_t i = static_cast<size_t>(q) * nch + c;
          if ((!(*sends)[i] || !(*recvs)[i]) && (late.empty() || late.back() != q)) late.push_back(q);
        }
      return errorStatus(loomTimeout, "network connections with rank(s) {} not up after {} ms (LOOM_TIMEOUT_MS)",
                         rankList(late), timeoutMs);
    }
    nap(napUs);
    napUs = std::min<int64_t>(napUs * 2, 1000);
  }
  return Status::Ok();
}

}  // namespace

Status connectNetComms(PeerExchange& exchange, Provider* provider, const Status& providerError, int device,
                       const std::vector<bool>& peers, int nch, int tag, int64_t timeoutMs,
                       std::vector<std::unique_ptr<SendComm>>* sends, std::vector<std::unique_ptr<RecvComm>>* recvs) {
  const int rank = exchange.rank(), nranks = exchange.nranks();
  const size_t slots = static_cast<size_t>(nranks) * nch;
  sends->clear();
  recvs->clear();
  sends->resize(slots);
  recvs->resize(slots);

  // Listen first: one listen comm per incoming connection.
  Status local = providerError;
  std::vector<std::unique_ptr<ListenComm>> listens(slots);
  std::vector<Handle> listenHandles(slots);
  for (int q = 0; q < nranks && local.ok(); ++q)
    for (int c = 0; peers[q] && c < nch && local.ok(); ++c) {
      const size_t i = static_cast<size_t>(q) * nch + c;
      local = provider->listen(device, &listenHandles[i], &listens[i]);
    }

  // Every rank learns whether every other one could listen, before any waits for a peer's handles: a
  // rank that failed may not know who counts it as a peer (a rank without FIFOs names none).
  LOOM_TRY(agreeOnNetOutcome(exchange, local));

  // Then each network peer gets only what concerns it: this rank's header and the nch handles it
  // listens on for that peer's connections. (An all-gather of every rank's handles for every peer gave
  // every rank n x n x nch handles: 0.4 GB per rank in a job of 1024 ranks.) Peers in turn from the
  // next rank up, so that not every rank connects to the same one first.
  RecordHeader header;
  std::snprintf(header.provider, sizeof header.provider, "%s", provider->name().c_str());
  const size_t messageBytes = sizeof header + static_cast<size_t>(nch) * kHandleBytes;
  std::vector<char> message(messageBytes);
  std::memcpy(message.data(), &header, sizeof header);
  Status mine;
  for (int k = 1; k < nranks; ++k) {
    const int q = (rank + k) % nranks;
    if (!peers[q]) continue;
    for (int c = 0; c < nch; ++c)
      std::memcpy(message.data() + sizeof header + static_cast<size_t>(c) * kHandleBytes,
                  listenHandles[static_cast<size_t>(q) * nch + c].bytes.data(), kHandleBytes);
    const Status sent = exchange.sendMessage(q, tag, message.data(), message.size());
    if (!sent.ok() && mine.ok()) mine = sent.withContext(fmt::format("sending rank {} this rank's network handles", q));
  }
  // A rank that could not send (out of descriptors) says so before any rank waits for its message
  // (without a timeout, forever).
  LOOM_TRY(agreeOnNetOutcome(exchange, mine));
  std::vector<Handle> connectHandles(slots);
  for (int k = 1; k < nranks && mine.ok(); ++k) {
    const int q = (rank + nranks - k) % nranks;
    if (!peers[q]) continue;
    std::vector<char> theirs;
    const Status got = exchange.recvMessage(q, tag, &theirs);
    if (!got.ok()) {
      mine = got.withContext(fmt::format("receiving rank {}'s network handles", q));
      break;
    }
    if (theirs.size() != messageBytes) {
      mine = errorStatus(loomInvalidUsage, "rank {} sent {} bytes of network handles where {} were expected (its "
                         "channels differ: LOOM_NCHANNELS must agree)", q, theirs.size(), messageBytes);
      break;
    }
    RecordHeader their;
    std::memcpy(&their, theirs.data(), sizeof their);
    their.provider[sizeof their.provider - 1] = '\0';
    if (provider->name() != their.provider) {
      mine = errorStatus(loomInvalidUsage, "rank {} uses network provider '{}' and this rank '{}' (LOOM_NET must agree)",
                         q, their.provider, provider->name());
      break;
    }
    for (int c = 0; c < nch; ++c)
      std::memcpy(connectHandles[static_cast<size_t>(q) * nch + c].bytes.data(),
                  theirs.data() + sizeof header + static_cast<size_t>(c) * kHandleBytes, kHandleBytes);
  }
  // A rank that could not send or receive (a peer gone, providers that differ) says so to all.
  LOOM_TRY(agreeOnNetOutcome(exchange, mine));

  // Then drive every connect and accept until all are up. A rank that fails here tells its peers
  // (they would wait for its connections forever where no timeout is set), and a rank that waits
  // looks for such a notice from the peers it still misses.
  std::vector<int> netPeers;
  for (int q = 0; q < nranks; ++q)
    if (peers[q]) netPeers.push_back(q);
  bool peerFailed = false;
  Status driven =
      driveConnections(exchange, provider, device, peers, nch, timeoutMs, listens, connectHandles, sends, recvs, &peerFailed);
  if (!driven.ok()) {
    // What this rank holds goes first: out of descriptors, it could not open the connections that tell
    // its peers otherwise.
    listens.clear();
    sends->clear();
    recvs->clear();
    // A peer's failure is passed on as it came: it names the rank that failed first.
    const std::string reason =
        peerFailed ? driven.message() : fmt::format("rank {} could not connect: {}", rank, driven.message());
    const std::vector<char> notice = encodeNetNotice(-1, reason);
    exchange.tellEach(netPeers, kNetNoticeTag, notice.data(), notice.size(), kNoticeDrainMs);
    return driven;
  }
  // Both ways to each peer are up and nothing was sent yet: the provider may join them.
  for (int q = 0; q < nranks; ++q)
    for (int c = 0; peers[q] && c < nch; ++c) {
      const size_t i = static_cast<size_t>(q) * nch + c;
      provider->pairComms(*(*sends)[i], *(*recvs)[i]);
    }
  return Status::Ok();
}

Status connectNetPeers(PeerExchange& exchange, Provider* provider, const Status& providerError, int device,
                       const std::vector<bool>& peers, const NetLinks& links, SendCounters* counters,
                       std::vector<std::unique_ptr<SendConnection>>* sends,
                       std::vector<std::unique_ptr<RecvConnection>>* recvs) {
  std::vector<std::unique_ptr<SendComm>> sendComms;
  std::vector<std::unique_ptr<RecvComm>> recvComms;
  LOOM_TRY(connectNetComms(exchange, provider, providerError, device, peers, links.nchannels, kHostConnectionsTag,
                           links.timeoutMs, &sendComms, &recvComms));
  for (size_t i = 0; i < sendComms.size(); ++i) {
    if (!sendComms[i]) continue;
    const int peer = static_cast<int>(i / links.nchannels);
    std::unique_ptr<NetSendConnection> send;
    LOOM_TRY(NetSendConnection::create(std::move(sendComms[i]), links.nslots, links.slotBytes, peer, links.direct,
                                       counters, &send));
    (*sends)[i] = std::move(send);
    std::unique_ptr<NetRecvConnection> recv;
    LOOM_TRY(NetRecvConnection::create(std::move(recvComms[i]), links.nslots, links.slotBytes, peer, &recv));
    (*recvs)[i] = std::move(recv);
  }
  return Status::Ok();
}

}  // namespace loom::net
