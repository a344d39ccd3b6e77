#include "core/observe/state_gather.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

namespace loom {
namespace {

// How long run() sleeps in one poll at most (a gather's deadline is always nearer).
constexpr int kGatherPollCapMs = 1000;

}  // namespace

StateGather::StateGather(StateAddressBook book, Deadline deadline)
    : book_(std::move(book)),
      deadline_(deadline),
      states_(static_cast<size_t>(book_.nranks)),
      why_(static_cast<size_t>(book_.nranks)) {
  openAsks();
}

void StateGather::addPollFds(std::vector<pollfd>* fds) {
  pollIndex_ = fds->size();
  polled_ = open_.size();
  for (const Ask& ask : open_) {
    const bool sending = ask.stage == Stage::Connecting || ask.stage == Stage::SendingHello;
    fds->push_back({ask.socket.fd(), static_cast<short>(sending ? POLLOUT : POLLIN), 0});
  }
}

void StateGather::advance(const std::vector<pollfd>& fds) {
  for (size_t i = 0; i < polled_; ++i) {
    Ask& ask = open_[i];
    if (fds[pollIndex_ + i].revents == 0) continue;
    std::optional<CommState> state;
    const Status moved = step(&ask, &state);
    if (!moved.ok() || state) {
      settle(ask.rank, std::move(state), moved.message());
      ask.socket.close();
    }
  }
  polled_ = 0;
  std::erase_if(open_, [](const Ask& ask) { return !ask.socket.valid(); });
  if (deadline_.expired()) giveUp("no answer in time");
  else openAsks();
}

void StateGather::run() {
  std::vector<pollfd> fds;
  while (!done()) {
    fds.clear();
    addPollFds(&fds);
    // Rounded up: polling again and again through the deadline's last millisecond would spin.
    const int waitMs = deadline_.expired() ? 0 : deadline_.remainingMs(kGatherPollCapMs - 1) + 1;
    if (::poll(fds.data(), fds.size(), waitMs) >= 0) {
      advance(fds);
    } else if (errno != EINTR) {
      giveUp(fmt::format("poll: {}", std::strerror(errno)));
    }
  }
}

void StateGather::openAsks() {
  while (open_.size() < kOpenAsks && nextRank_ < book_.nranks) {
    Ask ask;
    ask.rank = nextRank_++;
    const Status opened = connect(&ask);
    if (opened.ok()) open_.push_back(std::move(ask));
    else settle(ask.rank, std::nullopt, opened.message());
  }
}

Status StateGather::connect(Ask* ask) {
  const SocketAddress& addr = book_.stateAddresses[static_cast<size_t>(ask->rank)];
  if (addr.port == 0) return errorStatus(loomInvalidUsage, "rank {} serves no state (LOOM_DOCTOR=0)", ask->rank);
  ask->socket = Socket(::socket(addr.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!ask->socket.valid()) return systemError("socket: {}", std::strerror(errno));
  socklen_t len = 0;
  const sockaddr_storage ss = addr.toSockaddr(&len);
  // Its rank's port was up when init exchanged it: a refusal means its process is gone, not late.
  if (::connect(ask->socket.fd(), reinterpret_cast<const sockaddr*>(&ss), len) != 0 && errno != EINPROGRESS)
    return systemError("connect to {}: {}", addr.toString(), std::strerror(errno));
  const Hello hello = stateHello(book_);
  ask->bytes.assign(reinterpret_cast<const char*>(&hello), sizeof hello);
  return Status::Ok();
}

Status StateGather::step(Ask* ask, std::optional<CommState>* state) {
  if (ask->stage == Stage::Connecting) {
    int error = 0;
    socklen_t len = sizeof error;
    getsockopt(ask->socket.fd(), SOL_SOCKET, SO_ERROR, &error, &len);
    if (error != 0)
      return systemError("connect to {}: {}", book_.stateAddresses[static_cast<size_t>(ask->rank)].toString(),
                         std::strerror(error));
    ask->stage = Stage::SendingHello;
  }
  if (ask->stage == Stage::SendingHello) {
    size_t sent = 0;
    LOOM_TRY(sendSome(ask->socket, ask->bytes.data() + ask->moved, ask->bytes.size() - ask->moved, &sent));
    ask->moved += sent;
    if (ask->moved == ask->bytes.size()) {
      ask->stage = Stage::ReadingSize;
      ask->bytes.assign(sizeof(uint32_t), '\0');
      ask->moved = 0;
    }
    return Status::Ok();  // the answer comes with a later event
  }
  for (;;) {
    size_t got = 0;
    LOOM_TRY(recvSome(ask->socket, ask->bytes.data() + ask->moved, ask->bytes.size() - ask->moved, &got));
    ask->moved += got;
    if (ask->moved < ask->bytes.size()) {
      if (got == 0) return Status::Ok();
      continue;
    }
    if (ask->stage == Stage::ReadingState) {
      CommState parsed;
      LOOM_TRY(parseCommState(ask->bytes, &parsed).withContext(fmt::format("rank {}'s state", ask->rank)));
      *state = std::move(parsed);
      return Status::Ok();
    }
    uint32_t bytes = 0;
    std::memcpy(&bytes, ask->bytes.data(), sizeof bytes);
    if (bytes == 0 || bytes > kMaxStateBytes)
      return errorStatus(loomRemoteError, "rank {} sent a state of {} bytes", ask->rank, bytes);
    ask->stage = Stage::ReadingState;
    ask->bytes.assign(bytes, '\0');
    ask->moved = 0;
  }
}

void StateGather::giveUp(const std::string& why) {
  for (const Ask& ask : open_) {
    const char* doing = ask.stage == Stage::Connecting     ? "connecting"
                        : ask.stage == Stage::SendingHello ? "sending the request"
                                                            : "reading its state";
    settle(ask.rank, std::nullopt, fmt::format("{} (while {})", why, doing));
  }
  open_.clear();
  polled_ = 0;
  for (; nextRank_ < book_.nranks; ++nextRank_) settle(nextRank_, std::nullopt, fmt::format("{} (not asked yet)", why));
}

void StateGather::settle(int rank, std::optional<CommState> state, std::string why) {
  states_[static_cast<size_t>(rank)] = std::move(state);
  why_[static_cast<size_t>(rank)] = std::move(why);
  ++settled_;
}

}  // namespace loom
