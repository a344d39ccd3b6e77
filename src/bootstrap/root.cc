#include "bootstrap/root.h"

#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <cerrno>
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

  // Accepts ranks as they come and reads each one's Hello and RankInfo as its bytes arrive, so one
  // slow rank (a thread not yet scheduled, a far host) holds up no other: at most kMaxJoining
  // connections are open at once, each closed once answered.
  void serve(const Socket& listener) {
    traffic_->opened();  // the listener
    const Deadline deadline = Deadline::afterMs(settingInt(Setting::BootstrapTimeoutMs));
    std::vector<Joining> joining;
    std::vector<pollfd> fds;
    while (!(nranks_ > 0 && (failure_.empty() ? joined_ == nranks_ : answered_ >= nranks_))) {
      if (deadline.expired()) {
        LOOM_WARN(Boot, "rendezvous on {} gives up with {} of {} ranks: timed out", id_.root.toString(), joined_, nranks_);
        return;
      }
      fds.clear();
      const bool accepting = joining.size() < kMaxJoining;
      if (accepting) fds.push_back(pollfd{listener.fd(), POLLIN, 0});
      for (const Joining& j : joining) fds.push_back(pollfd{j.socket.fd(), POLLIN, 0});
      if (::poll(fds.data(), fds.size(), deadline.remainingMs(100)) < 0 && errno != EINTR) {
        LOOM_WARN(Boot, "rendezvous on {}: poll: {}", id_.root.toString(), std::strerror(errno));
        return;
      }
      const size_t first = accepting ? 1 : 0;
      for (size_t i = 0; i < joining.size(); ++i)
        if (fds[first + i].revents != 0) read(joining[i]);
      // A connection silent past kHelloTimeoutMs loses its place only when the place is wanted (every
      // place taken): a rank whose thread is slow to speak is dropped only under load, and joins
      // again (Bootstrap::joinRendezvous retries), while a stranger cannot hold places forever.
      const uint64_t now = nowNs();
      const bool full = joining.size() >= kMaxJoining;
      for (size_t i = 0; i < joining.size();) {
        Joining& j = joining[i];
        if (full && j.socket.valid() && now - j.sinceNs > static_cast<uint64_t>(kHelloTimeoutMs) * 1000000u) {
          LOOM_INFO(Boot, "rendezvous: dropped a connection that sent {} of {} bytes in {} ms", j.got, sizeof(j.bytes),
                    kHelloTimeoutMs);
          j.socket.close();
        }
        if (j.socket.valid()) {
          ++i;
          continue;
        }
        traffic_->closed();
        joining[i] = std::move(joining.back());
        joining.pop_back();
      }
      if (accepting && (fds[0].revents & POLLIN)) acceptAll(listener, &joining);
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
    (void)sendFrame(s, kFrameRefused, why.data(), why.size(), Deadline::afterMs(kHelloTimeoutMs));
  }

  struct Joining {
    Socket socket;
    char bytes[sizeof(Hello) + sizeof(RankInfo)];
    size_t got = 0;
    uint64_t sinceNs = 0;
  };
  static constexpr size_t kMaxJoining = 64;

  void acceptAll(const Socket& listener, std::vector<Joining>* joining) {
    while (joining->size() < kMaxJoining) {
      const int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
          LOOM_WARN(Boot, "rendezvous on {}: accept: {}", id_.root.toString(), std::strerror(errno));
        return;
      }
      traffic_->opened();
      joining->emplace_back();
      joining->back().socket = Socket(fd);
      joining->back().sinceNs = nowNs();
    }
  }

  // Reads what `j` sent so far; once its Hello is in, checks it; once its RankInfo is in, answers it.
  // A connection that is done (answered, refused, junk or closed) is closed here.
  void read(Joining& j) {
    size_t moved = 0;
    Status st = recvSome(j.socket, j.bytes + j.got, sizeof(j.bytes) - j.got, &moved);
    const bool hadHello = j.got >= sizeof(Hello);
    j.got += moved;
    traffic_->bytesReceived += moved;
    if (!st.ok()) {
      LOOM_WARN(Boot, "rendezvous: dropped a connection after {} bytes: {}", j.got, st.message());
      j.socket.close();
      return;
    }
    if (!hadHello && j.got >= sizeof(Hello) && !helloIsValid(j)) {
      j.socket.close();
      return;
    }
    if (j.got < sizeof(j.bytes)) return;
    Hello hello;
    RankInfo info;
    std::memcpy(&hello, j.bytes, sizeof(hello));
    std::memcpy(&info, j.bytes + sizeof(hello), sizeof(info));
    admit(j.socket, hello, info);
    j.socket.close();
  }

  bool helloIsValid(const Joining& j) {
    Hello raw, hello;
    std::memcpy(&raw, j.bytes, sizeof(raw));
    Status valid = parseHello(&raw, sizeof(raw), id_.secret, HelloKind::ToRoot, 0, &hello);
    if (valid.ok()) return true;
    // A rank of this job (its secret) that speaks another version: the whole job is refused, naming both.
    if (raw.magic == kWireMagic && raw.version != kWireVersion && std::memcmp(raw.secret, id_.secret, kSecretBytes) == 0) {
      const std::string why = fmt::format("rank {} speaks bootstrap wire version {}, the rendezvous version {}",
                                          raw.rank, raw.version, kWireVersion);
      refuse(j.socket, why);
      if (nranks_ < 0 && raw.nranks > 0 && raw.nranks <= kMaxRanks) start(raw.nranks);
      ++answered_;
      if (failure_.empty()) failJob(why);
      return false;
    }
    LOOM_WARN(Boot, "rendezvous: dropped a connection: {}", valid.message());
    return false;
  }

  void admit(const Socket& client, const Hello& hello, RankInfo info) {
    const Deadline helloDeadline = Deadline::afterMs(kHelloTimeoutMs);
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
    if (joined(hello.rank) && sameRank(infos_[static_cast<size_t>(hello.rank)], info)) {
      answer(client, hello.rank, helloDeadline);  // it joins again: its first answer was lost
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
    answer(client, hello.rank, helloDeadline);
  }

  void answer(const Socket& client, int rank, Deadline deadline) {
    JoinAnswer a;
    a.leaderRank = leaderOfHost_[static_cast<size_t>(hostOfRank_[static_cast<size_t>(rank)])];
    a.leaderAddress = infos_[static_cast<size_t>(a.leaderRank)].listenAddress;
    (void)sendFrame(client, kFrameOk, &a, sizeof(a), deadline);
  }

  static bool sameRank(const RankInfo& a, const RankInfo& b) {
    return a.process.sameProcess(b.process) && std::memcmp(&a.listenAddress, &b.listenAddress, sizeof(a.listenAddress)) == 0;
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
    uint64_t tableId = 0;
    if (getrandom(&tableId, sizeof(tableId), 0) != static_cast<ssize_t>(sizeof(tableId))) tableId = nowNs();
    const std::vector<char> table = encodeRankTable(tableId, infos_, hostOfRank_, leaderOfHost_);
    Status st = tellLeader(leaderOfHost_[0], kFrameOk, table.data(), table.size());
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
      Status st = tellLeader(leader, kFrameRefused, why.data(), why.size());
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
