#include "bootstrap/root.h"

#include <cstring>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/log.h"
#include "base/settings.h"
#include "bootstrap/rank_table.h"

namespace loom {
namespace {

class Rendezvous {
 public:
  Rendezvous(const UniqueIdData& id, BootstrapTraffic* traffic) : id_(id), traffic_(traffic ? traffic : &own_) {}

  void serve(const Socket& listener) {
    traffic_->opened();  // the listener
    const Deadline deadline = Deadline::afterMs(settingInt(Setting::BootstrapTimeoutMs));
    while (!(nranks_ > 0 && (failure_.empty() ? joined_ == nranks_ : answered_ >= nranks_))) {
      Socket client;
      Status st = acceptOne(listener, deadline, nullptr, &client);
      if (!st.ok()) {
        LOOM_WARN(Boot, "rendezvous on {} gives up with {} of {} ranks: {}", id_.root.toString(), joined_, nranks_,
                  st.message());
        return;
      }
      traffic_->opened();
      admit(client);
      traffic_->closed();
    }
    if (failure_.empty()) sendTable();
  }

 private:
  Status send(const Socket& s, const void* data, size_t bytes, Deadline deadline) {
    traffic_->bytesSent += bytes;
    return sendAll(s, data, bytes, deadline, nullptr);
  }
  Status recv(const Socket& s, void* data, size_t bytes, Deadline deadline) {
    traffic_->bytesReceived += bytes;
    return recvAll(s, data, bytes, deadline, nullptr);
  }
  Status sendFrame(const Socket& s, uint32_t status, const void* data, size_t bytes, Deadline deadline) {
    Frame frame{status, static_cast<uint32_t>(bytes)};
    LOOM_TRY(send(s, &frame, sizeof(frame), deadline));
    return bytes > 0 ? send(s, data, bytes, deadline) : Status::Ok();
  }
  void refuse(const Socket& s, const std::string& why) {
    LOOM_WARN(Boot, "rendezvous: refusing a rank: {}", why);
    (void)sendFrame(s, 1, why.data(), why.size(), Deadline::afterMs(kHelloTimeoutMs));
  }

  void admit(const Socket& client) {
    Hello raw, hello;
    const Deadline helloDeadline = Deadline::afterMs(kHelloTimeoutMs);
    Status received = recv(client, &raw, sizeof(raw), helloDeadline);
    Status valid = received.ok() ? parseHello(&raw, sizeof(raw), id_.secret, HelloKind::ToRoot, 0, &hello) : received;
    if (!valid.ok()) {
      // A rank of this job (its secret) that speaks another version: the whole job is refused, naming both.
      if (received.ok() && raw.magic == kWireMagic && raw.version != kWireVersion &&
          std::memcmp(raw.secret, id_.secret, kSecretBytes) == 0) {
        const std::string why = fmt::format("rank {} speaks bootstrap wire version {}, the rendezvous version {}",
                                            raw.rank, raw.version, kWireVersion);
        refuse(client, why);
        if (nranks_ < 0 && raw.nranks > 0) nranks_ = raw.nranks;
        ++answered_;
        if (failure_.empty()) failJob(why);
        return;
      }
      LOOM_WARN(Boot, "rendezvous: dropped a connection: {}", valid.message());
      return;
    }
    RankInfo info;
    if (!recv(client, &info, sizeof(info), helloDeadline).ok()) {
      LOOM_WARN(Boot, "rendezvous: rank {} hung up during hello", hello.rank);
      return;
    }
    if (!failure_.empty()) {
      refuse(client, failure_);
      ++answered_;
      return;
    }
    if (nranks_ < 0) start(hello.nranks);
    if (hello.nranks != nranks_) {
      const std::string why =
          fmt::format("rank {} says nranks={}, the ranks before it said {}", hello.rank, hello.nranks, nranks_);
      refuse(client, why);
      ++answered_;
      failJob(why);
      return;
    }
    if (hello.rank >= nranks_ || joined(hello.rank)) {
      refuse(client, fmt::format("rank {} is out of range or already joined (nranks={})", hello.rank, nranks_));
      return;
    }
    info.process.hostname[sizeof(info.process.hostname) - 1] = '\0';
    const size_t r = static_cast<size_t>(hello.rank);
    infos_[r] = info;
    auto [it, newHost] = hostIndex_.emplace(info.process.hostHash, static_cast<int32_t>(leaderOfHost_.size()));
    if (newHost) leaderOfHost_.push_back(hello.rank);
    hostOfRank_[r] = it->second;
    ++joined_;
    ++answered_;
    JoinAnswer answer;
    answer.leaderRank = leaderOfHost_[static_cast<size_t>(it->second)];
    answer.leaderAddress = infos_[static_cast<size_t>(answer.leaderRank)].listenAddress;
    (void)sendFrame(client, 0, &answer, sizeof(answer), helloDeadline);
  }

  void start(int nranks) {
    nranks_ = nranks;
    infos_.resize(static_cast<size_t>(nranks));
    hostOfRank_.assign(static_cast<size_t>(nranks), -1);
  }
  bool joined(int rank) const { return hostOfRank_[static_cast<size_t>(rank)] >= 0; }

  // Sends a Hello and one frame to `leader`'s listener, as the top of the tree of leaders.
  Status tellLeader(int leader, uint32_t status, const void* data, size_t bytes) {
    const Deadline deadline = Deadline::afterMs(settingInt(Setting::BootstrapTimeoutMs));
    Socket s;
    LOOM_TRY(connectTo(infos_[static_cast<size_t>(leader)].listenAddress, deadline, nullptr, &s));
    traffic_->opened();
    Hello hello;
    std::memcpy(hello.secret, id_.secret, kSecretBytes);
    hello.kind = static_cast<uint32_t>(HelloKind::FromParent);
    hello.rank = leader;
    hello.nranks = nranks_;
    hello.tag = -1;  // from the rendezvous, not a parent leader
    Status st = send(s, &hello, sizeof(hello), deadline);
    if (st.ok()) st = sendFrame(s, status, data, bytes, deadline);
    traffic_->closed();
    return st;
  }

  void sendTable() {
    const std::vector<char> table = encodeRankTable(infos_, hostOfRank_, leaderOfHost_);
    Status st = tellLeader(leaderOfHost_[0], 0, table.data(), table.size());
    if (!st.ok()) {
      failJob(fmt::format("the rendezvous could not hand the table to rank {}, the leader of host 0: {}",
                          leaderOfHost_[0], st.message()));
      return;
    }
    LOOM_INFO(Boot, "rendezvous on {}: {} ranks on {} hosts joined; a table of {} bytes", id_.root.toString(), nranks_,
              leaderOfHost_.size(), table.size());
  }

  // Every rank joined so far waits on its host's leader: each leader is told why (and tells its ranks).
  void failJob(const std::string& why) {
    failure_ = why;
    for (int32_t leader : leaderOfHost_) {
      Status st = tellLeader(leader, 1, why.data(), why.size());
      if (!st.ok()) LOOM_WARN(Boot, "rendezvous: could not tell rank {} that the job failed: {}", leader, st.message());
    }
  }

  const UniqueIdData id_;
  BootstrapTraffic own_;
  BootstrapTraffic* traffic_;
  int nranks_ = -1;
  int joined_ = 0;
  int answered_ = 0;  // ranks that were answered (joined, or refused once the job failed)
  std::string failure_;
  std::vector<RankInfo> infos_;
  std::vector<int32_t> hostOfRank_;  // -1: not joined
  std::vector<int32_t> leaderOfHost_;
  std::unordered_map<uint64_t, int32_t> hostIndex_;  // by ProcessIdentity::hostHash
};

}  // namespace

void serveRendezvous(Socket listener, const UniqueIdData& id, BootstrapTraffic* traffic) {
  Rendezvous(id, traffic).serve(listener);
}

void startRoot(Socket listener, const UniqueIdData& id) {
  std::thread([listener = std::move(listener), id]() mutable { serveRendezvous(std::move(listener), id, nullptr); })
      .detach();
}

}  // namespace loom
