#include "core/observe/conversation.h"

#include <utility>

namespace loom {

Conversation::Conversation(Socket socket, size_t requestBytes)
    : socket_(std::move(socket)), requestBytes_(requestBytes), deadline_(Deadline::afterMs(kRequestMs)) {
  bytes_.resize(requestBytes_);
}

void Conversation::addPollFd(std::vector<pollfd>* fds) {
  pollIndex_ = fds->size();
  // While its answer is made there is nothing to wait for (and a peer that hung up meanwhile must not
  // wake the loop again and again): poll passes over a negative descriptor.
  const bool waits = stage_ == Stage::Reading || stage_ == Stage::Writing;
  fds->push_back({waits ? socket_.fd() : -1, static_cast<short>(stage_ == Stage::Writing ? POLLOUT : POLLIN), 0});
}

Status Conversation::advance(const std::vector<pollfd>& fds, std::optional<std::string>* request) {
  request->reset();
  const bool ready = fds[pollIndex_].revents != 0;
  Status progress;
  if (ready && stage_ == Stage::Reading) progress = read(request);
  else if (ready && stage_ == Stage::Writing) progress = write();
  if (progress.ok() && stage_ != Stage::Ended && deadline_.expired())
    progress = errorStatus(loomTimeout, "no {} within {} ms", stage_ == Stage::Reading ? "request" : "reader of the answer",
                           stage_ == Stage::Reading ? kRequestMs : kAnswerMs);
  if (!progress.ok()) stage_ = Stage::Ended;
  return progress;
}

void Conversation::answer(std::string bytes) {
  bytes_ = std::move(bytes);
  moved_ = 0;
  stage_ = Stage::Writing;
  deadline_ = Deadline::afterMs(kAnswerMs);
}

Status Conversation::read(std::optional<std::string>* request) {
  if (requestBytes_ == 0) {
    LOOM_TRY(lines_.readAvailable(socket_, request));
  } else {
    size_t got = 1;
    while (moved_ < requestBytes_ && got > 0) {
      LOOM_TRY(recvSome(socket_, bytes_.data() + moved_, requestBytes_ - moved_, &got));
      moved_ += got;
    }
    if (moved_ == requestBytes_) *request = std::move(bytes_);
  }
  if (*request) {
    stage_ = Stage::Answering;
    deadline_ = Deadline();
  }
  return Status::Ok();
}

Status Conversation::write() {
  size_t sent = 1;
  while (moved_ < bytes_.size() && sent > 0) {
    LOOM_TRY(sendSome(socket_, bytes_.data() + moved_, bytes_.size() - moved_, &sent));
    moved_ += sent;
  }
  if (moved_ == bytes_.size()) stage_ = Stage::Ended;
  return Status::Ok();
}

}  // namespace loom
