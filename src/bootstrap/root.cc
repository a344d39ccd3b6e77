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

  // Serves the hosts' leaders as they come (poll, at most kRendezvousMaxOpen connections at once):
  // each sends records (its own, then its host's ranks' as they join it) on short connections of its
  // own.
  void serve(const Socket& listener) {
    traffic_->opened();  // the listener
    const Deadline deadline = Deadline::afterMs(settingInt(Setting::BootstrapTimeoutMs));
    std::vector<pollfd> fds;
    while (!(nranks_ > 0 && (failure_.empty() ? joined_ == nranks_ : answered_ >= nranks_))) {
      if (deadline.expired()) {
        LOOM_WARN(Boot, "rendezvous on {} gives up with {} of {} ranks: timed out", id_.root.toString(), joined_, nranks_);
        return;
      }
      fds.clear();
      const bool accepting = open_.size() < kRendezvousMaxOpen;
      fds.push_back(pollfd{accepting ? listener.fd() : -1, POLLIN, 0});
      for (const Sender& l : open_) fds.push_back(pollfd{l.socket.fd(), POLLIN, 0});
      if (::poll(fds.data(), fds.size(), deadline.remainingMs(100)) < 0 && errno != EINTR) {
        LOOM_WARN(Boot, "rendezvous on {}: poll: {}", id_.root.toString(), std::strerror(errno));
        return;
      }
      const uint64_t now = nowNs();
      for (size_t i = 0; i < open_.size(); ++i) {
        Sender& l = open_[i];
        if (fds[1 + i].revents != 0) read(l);
        // A connection silent past kHelloTimeoutMs (a stranger, or a leader's thread that stalls in the
        // middle of a record) is dropped when its place is wanted.
        if (l.socket.valid() && !accepting && now - l.lastNs > static_cast<uint64_t>(kHelloTimeoutMs) * 1000000u) {
          LOOM_WARN(Boot, "rendezvous: dropped a connection silent for {} ms", kHelloTimeoutMs);
          l.socket.close();
        }
      }
      for (size_t i = 0; i < open_.size();) {
        if (open_[i].socket.valid()) {
          ++i;
          continue;
        }
        traffic_->closed();
        open_[i] = std::move(open_.back());
        open_.pop_back();
      }
      if (accepting && (fds[0].revents & POLLIN)) acceptAll(listener);
    }
    if (failure_.empty()) sendTable();
  }

 private:
  // A leader's connection, and the record it is sending (a Hello whose tag is the leader's rank, and
  // a RankInfo).
  struct Sender {
    Socket socket;
    char bytes[sizeof(Hello) + sizeof(RankInfo)];
    size_t got = 0;
    uint64_t lastNs = 0;  // when it last sent something
  };

  Status send(const Socket& s, const void* data, size_t bytes, Deadline deadline) {
    traffic_->bytesSent += bytes;
    return sendAll(s, data, bytes, deadline, nullptr);
  }
  Status sendFrame(const Socket& s, uint32_t status, const void* data, size_t bytes, Deadline deadline) {
    Frame frame{status, static_cast<uint32_t>(bytes)};
    LOOM_TRY(send(s, &frame, sizeof(frame), deadline));
    return bytes > 0 ? send(s, data, bytes, deadline) : Status::Ok();
  }
  void refuse(const Socket& s, const std::string& why) {
    (void)sendFrame(s, kFrameRefused, why.data(), why.size(), Deadline::afterMs(kHelloTimeoutMs));
  }

  void acceptAll(const Socket& listener) {
    while (open_.size() < kRendezvousMaxOpen) {
      const int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
          LOOM_WARN(Boot, "rendezvous on {}: accept: {}{}", id_.root.toString(), std::strerror(errno),
                    errno == EMFILE ? " (a leader per host: raise the descriptor limit, ulimit -n)" : "");
        return;
      }
      traffic_->opened();
      open_.emplace_back();
      open_.back().socket = Socket(fd);
      open_.back().lastNs = nowNs();
    }
  }

  // Reads what `l` sent; each complete record is admitted. The leader closes the connection once its
  // records are sent: a close between records is the normal end.
  void read(Sender& l) {
    for (;;) {
      size_t moved = 0;
      Status st = recvSome(l.socket, l.bytes + l.got, sizeof(l.bytes) - l.got, &moved);
      const bool hadHello = l.got >= sizeof(Hello);
      l.got += moved;
      traffic_->bytesReceived += moved;
      if (moved > 0) l.lastNs = nowNs();
      if (!st.ok()) {
        if (l.got > 0) LOOM_WARN(Boot, "rendezvous: a connection closed in the middle of a record: {}", st.message());
        l.socket.close();
        return;
      }
      if (!hadHello && l.got >= sizeof(Hello) && !helloIsValid(l)) {
        l.socket.close();
        return;
      }
      if (moved == 0 || l.got < sizeof(l.bytes)) return;  // the rest later
      Hello hello;
      RankInfo info;
      std::memcpy(&hello, l.bytes, sizeof(hello));
      std::memcpy(&info, l.bytes + sizeof(hello), sizeof(info));
      l.got = 0;
      admit(hello, info);
    }
  }

  bool helloIsValid(Sender& l) {
    Hello raw, hello;
    std::memcpy(&raw, l.bytes, sizeof(raw));
    Status valid = parseHello(&raw, sizeof(raw), id_.secret, HelloKind::ToRoot, 0, &hello);
    if (valid.ok()) return true;
    // A rank of this job (its secret) that speaks another version: the whole job is refused, naming both.
    if (raw.magic == kWireMagic && raw.version != kWireVersion && std::memcmp(raw.secret, id_.secret, kSecretBytes) == 0) {
      const std::string why = fmt::format("rank {} speaks bootstrap wire version {}, the rendezvous version {}",
                                          raw.rank, raw.version, kWireVersion);
      LOOM_WARN(Boot, "rendezvous: {}", why);
      refuse(l.socket, why);
      if (nranks_ < 0 && raw.nranks > 0 && raw.nranks <= kMaxRanks) start(raw.nranks);
      ++answered_;
      if (failure_.empty()) failJob(why);
      return false;
    }
    LOOM_WARN(Boot, "rendezvous: dropped a connection: {}", valid.message());
    return false;
  }

  void admit(const Hello& hello, RankInfo info) {
    ++answered_;
    if (!failure_.empty()) {  // the job failed before this leader came: it learns why
      if (hello.tag == hello.rank) (void)tellLeader(info.listenAddress, hello.rank, kFrameRefused, failure_.data(), failure_.size());
      return;
    }
    if (nranks_ < 0) start(hello.nranks);
    if (hello.nranks != nranks_) {
      failJob(fmt::format("rank {} says nranks={}, the ranks before it said {}", hello.rank, hello.nranks, nranks_));
      return;
    }
    info.process.hostname[sizeof(info.process.hostname) - 1] = '\0';
    const size_t r = static_cast<size_t>(hello.rank);
    if (joined(hello.rank)) {
      const int first = leaderOfHost_[static_cast<size_t>(hostOfRank_[r])];
      failJob(hello.tag != first
                  ? fmt::format("rank {} joined twice, through rank {} and then through rank {}: its host's first "
                                "leader (rank {}) must have gone",
                                hello.rank, first, hello.tag, first)
                  : fmt::format("rank {} joined twice (from {} and from {})", hello.rank,
                                infos_[r].listenAddress.toString(), info.listenAddress.toString()));
      return;
    }
    if (hello.tag < 0 || hello.tag >= nranks_) {
      failJob(fmt::format("rank {} came through rank {}, which is no rank of this job", hello.rank, hello.tag));
      return;
    }
    auto [it, newHost] = hostOfLeader_.emplace(hello.tag, static_cast<int32_t>(leaderOfHost_.size()));
    if (newHost) leaderOfHost_.push_back(hello.tag);
    infos_[r] = info;
    hostOfRank_[r] = it->second;
    ++joined_;
  }

  void start(int nranks) {
    nranks_ = nranks;
    infos_.resize(static_cast<size_t>(nranks));
    hostOfRank_.assign(static_cast<size_t>(nranks), -1);
  }
  bool joined(int rank) const { return hostOfRank_[static_cast<size_t>(rank)] >= 0; }

  // Sends a Hello and one frame to `leader`'s listener, as the top of the tree of leaders.
  Status tellLeader(const SocketAddress& address, int leader, uint32_t status, const void* data, size_t bytes) {
    const Deadline deadline = Deadline::afterMs(settingInt(Setting::BootstrapTimeoutMs));
    Socket s;
    LOOM_TRY(connectTo(address, deadline, nullptr, &s, false));
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

  // The table goes to host 0's leader only, the top of the tree of leaders.
  void sendTable() {
    uint64_t tableId = 0;
    if (getrandom(&tableId, sizeof(tableId), 0) != static_cast<ssize_t>(sizeof(tableId))) tableId = nowNs();
    const std::vector<char> table = encodeRankTable(tableId, infos_, hostOfRank_, leaderOfHost_);
    const int top = leaderOfHost_[0];
    Status st = tellLeader(infos_[static_cast<size_t>(top)].listenAddress, top, kFrameOk, table.data(), table.size());
    if (!st.ok()) {
      failJob(fmt::format("the rendezvous could not hand the table to rank {}, the leader of host 0: {}", top, st.message()));
      return;
    }
    LOOM_INFO(Boot, "rendezvous on {}: {} ranks on {} hosts joined; a table of {} bytes", id_.root.toString(), nranks_,
              leaderOfHost_.size(), table.size());
  }

  // Every leader so far is told why, and tells its host's ranks; later ones are told as they come.
  void failJob(const std::string& why) {
    LOOM_WARN(Boot, "rendezvous: the job fails: {}", why);
    failure_ = why;
    for (int32_t leader : leaderOfHost_) {
      const RankInfo& info = infos_[static_cast<size_t>(leader)];
      if (!info.listenAddress.valid()) continue;  // its own record has not come yet: it is told when it does
      Status st = tellLeader(info.listenAddress, leader, kFrameRefused, why.data(), why.size());
      if (!st.ok()) LOOM_WARN(Boot, "rendezvous: could not tell rank {} that the job failed: {}", leader, st.message());
    }
  }

  const UniqueIdData id_;
  BootstrapTraffic own_;
  BootstrapTraffic* traffic_;
  int nranks_ = -1;
  int joined_ = 0;
  int answered_ = 0;  // ranks whose record came (joined, or refused once the job failed)
  std::string failure_;
  std::vector<Sender> open_;  // connections being read
  std::unordered_map<int32_t, int32_t> hostOfLeader_;  // a leader's rank -> its host's index
  std::vector<RankInfo> infos_;
  std::vector<int32_t> hostOfRank_;  // -1: not joined
  std::vector<int32_t> leaderOfHost_;
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
