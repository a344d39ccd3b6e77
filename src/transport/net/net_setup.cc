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

// What each rank tells the others before its handles.
struct RecordHeader {
  char provider[48] = {0};
  int32_t ok = 0;
  char error[204] = {0};
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

Status connectNetComms(PeerExchange& exchange, Provider* provider, const Status& providerError, int device,
                       const std::vector<bool>& peers, int nch, int64_t timeoutMs,
                       std::vector<std::unique_ptr<SendComm>>* sends, std::vector<std::unique_ptr<RecvComm>>* recvs) {
  const int rank = exchange.rank(), nranks = exchange.nranks();
  const size_t slots = static_cast<size_t>(nranks) * nch;
  const size_t recordBytes = sizeof(RecordHeader) + slots * kHandleBytes;
  auto handleAt = [&](char* record, size_t i) { return record + sizeof(RecordHeader) + i * kHandleBytes; };
  sends->clear();
  recvs->clear();
  sends->resize(slots);
  recvs->resize(slots);

  // Listen first: one listen comm per incoming connection, its handle in this rank's record.
  Status local = providerError;
  std::vector<std::unique_ptr<ListenComm>> listens(slots);
  std::vector<char> mine(recordBytes, 0);
  for (int q = 0; q < nranks && local.ok(); ++q)
    for (int c = 0; peers[q] && c < nch && local.ok(); ++c) {
      Handle h;
      const size_t i = static_cast<size_t>(q) * nch + c;
      local = provider->listen(device, &h, &listens[i]);
      std::memcpy(handleAt(mine.data(), i), h.bytes.data(), kHandleBytes);
    }
  RecordHeader header;
  if (provider) std::snprintf(header.provider, sizeof header.provider, "%s", provider->name().c_str());
  header.ok = local.ok() ? 1 : 0;
  std::snprintf(header.error, sizeof header.error, "%s", local.message().c_str());
  std::memcpy(mine.data(), &header, sizeof header);
  std::vector<char> all(recordBytes * nranks);
  LOOM_TRY(exchange.allGather(mine.data(), all.data(), recordBytes).withContext("exchanging network handles"));
  LOOM_TRY(local);
  for (int q = 0; q < nranks; ++q) {
    if (!peers[q]) continue;
    RecordHeader theirs;
    std::memcpy(&theirs, all.data() + q * recordBytes, sizeof theirs);
    theirs.error[sizeof theirs.error - 1] = theirs.provider[sizeof theirs.provider - 1] = '\0';
    if (!theirs.ok) return errorStatus(loomRemoteError, "rank {} could not set up its network: {}", q, theirs.error);
    if (provider->name() != theirs.provider)
      return errorStatus(loomInvalidUsage, "rank {} uses network provider '{}' and this rank '{}' (LOOM_NET must agree)",
                         q, theirs.provider, provider->name());
  }

  // Then drive every connect and accept until all are up.
  std::vector<Handle> connectHandles(slots);
  int missing = 0;
  for (int q = 0; q < nranks; ++q)
    for (int c = 0; peers[q] && c < nch; ++c) {
      const size_t i = static_cast<size_t>(q) * nch + c;
      std::memcpy(connectHandles[i].bytes.data(), handleAt(all.data() + q * recordBytes, static_cast<size_t>(rank) * nch + c),
                  kHandleBytes);
      missing += 2;
    }
  const Deadline deadline = Deadline::afterMs(timeoutMs);
  int64_t napUs = 20;
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
  LOOM_TRY(connectNetComms(exchange, provider, providerError, device, peers, links.nchannels, links.timeoutMs,
                           &sendComms, &recvComms));
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
