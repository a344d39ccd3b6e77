// One connection the state service accepted (on a state port or on the doctor socket), carried by the
// service thread's poll loop without ever blocking it: the request is read as it arrives and the
// answer written as the peer takes it, each by a deadline, so that a silent or slow peer holds up
// nothing but itself. What the request means and what answers it is the loop's business.
#pragma once

#include <poll.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/socket.h"
#include "base/status.h"
#include "core/observe/doctor_protocol.h"

namespace loom {

class Conversation {
 public:
  // The request: `requestBytes` bytes (a state port's Hello), or with 0 a line (loom-doctor's).
  Conversation(Socket socket, size_t requestBytes);

  // Adds what it waits for now to *fds; advance() finds its events there.
  void addPollFd(std::vector<pollfd>* fds);
  // After a poll: reads or writes as far as the socket goes now, or gives up past the deadline (an
  // error, which ends it). *request: the request, once, when it is whole; then it waits for answer().
  Status advance(const std::vector<pollfd>& fds, std::optional<std::string>* request);
  void answer(std::string bytes);
  // Ends it unanswered (a request that is refused).
  void end() { stage_ = Stage::Ended; }

  // Answered, failed or given up: the loop lets it go (which closes it).
  bool ended() const { return stage_ == Stage::Ended; }
  // Never while its answer is being made (a report's gather has a deadline of its own).
  Deadline deadline() const { return deadline_; }

 private:
  enum class Stage { Reading, Answering, Writing, Ended };
  static constexpr int kRequestMs = 1000;  // a peer that connects sends its request at once
  static constexpr int kAnswerMs = 1000;   // and reads the answer as it comes

  Status read(std::optional<std::string>* request);
  Status write();

  Socket socket_;
  size_t requestBytes_;
  LineReader lines_{kMaxRequestBytes};
  std::string bytes_;  // the request read so far, then the answer
  size_t moved_ = 0;
  Stage stage_ = Stage::Reading;
  Deadline deadline_;
  size_t pollIndex_ = 0;
};

}  // namespace loom
