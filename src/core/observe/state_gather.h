// Every rank's state of one communicator, asked over non-blocking connections to the ranks' state
// ports and advanced by poll events (connect, send the hello, read the size, read the state), so that
// no thread waits on any one rank. The state service's loop drives a gather among its other
// descriptors, which lets it answer its own process's ranks (thread ranks share a process) while it
// asks them; an operation's thread that reports after a timeout runs one to the end with a poll of its
// own. At most kOpenAsks connections are open at once, so that a huge job stays far below the
// process's descriptor limit.
#pragma once

#include <poll.h>

#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/socket.h"
#include "core/observe/comm_state.h"
#include "core/observe/state_exchange.h"

namespace loom {

class StateGather {
 public:
  static constexpr size_t kOpenAsks = 64;

  StateGather(StateAddressBook book, Deadline deadline);

  // Adds the descriptors its open asks wait on to *fds; advance() finds their events there.
  void addPollFds(std::vector<pollfd>* fds);
  // After a poll: moves each ask on as far as its socket goes now, opens more, and gives up on every
  // rank still asked once the deadline passed.
  void advance(const std::vector<pollfd>& fds);
  // Runs it to the end on this thread.
  void run();

  // Every rank answered or was given up.
  bool done() const { return settled_ == states_.size(); }
  Deadline deadline() const { return deadline_; }
  const StateAddressBook& book() const { return book_; }
  // states()[r]: rank r's, or none, and why()[r] says why.
  const std::vector<std::optional<CommState>>& states() const { return states_; }
  const std::vector<std::string>& why() const { return why_; }

 private:
  enum class Stage { Connecting, SendingHello, ReadingSize, ReadingState };
  struct Ask {
    int rank = 0;
    Socket socket;
    Stage stage = Stage::Connecting;
    std::string bytes;  // the hello to send, then the size or the state read
    size_t moved = 0;
  };

  void openAsks();
  Status connect(Ask* ask);
  // Moves `ask` on after an event; *state once it is in.
  Status step(Ask* ask, std::optional<CommState>* state);
  void settle(int rank, std::optional<CommState> state, std::string why);
  // Settles every rank not settled yet as missing, for `why`.
  void giveUp(const std::string& why);

  StateAddressBook book_;
  Deadline deadline_;
  std::vector<std::optional<CommState>> states_;
  std::vector<std::string> why_;
  size_t settled_ = 0;
  int nextRank_ = 0;
  std::vector<Ask> open_;
  size_t pollIndex_ = 0;
  size_t polled_ = 0;  // open_'s first asks that addPollFds added
};

}  // namespace loom
