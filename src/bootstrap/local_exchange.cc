#include "bootstrap/local_exchange.h"

#include <algorithm>
#include <cstring>
#include <map>

namespace loom {

std::shared_ptr<LocalExchange> LocalExchange::join(const uint8_t* secret, size_t secretBytes, int nranks) {
  static std::mutex registryMutex;
  static auto* registry = new std::map<std::string, std::weak_ptr<LocalExchange>>;  // outlives static destructors
  std::lock_guard<std::mutex> lock(registryMutex);
  std::erase_if(*registry, [](const auto& entry) { return entry.second.expired(); });
  const std::string key = std::string(reinterpret_cast<const char*>(secret), secretBytes) + std::to_string(nranks);
  if (std::shared_ptr<LocalExchange> found = (*registry)[key].lock()) return found;
  auto made = std::make_shared<LocalExchange>(nranks);
  (*registry)[key] = made;
  return made;
}

template <class Done>
Status LocalExchange::waitFor(std::unique_lock<std::mutex>& lock, Done done, Deadline deadline, const AbortFlag* abort) {
  // Slices of 50 ms: the abort flag is another thread's word, with no way to wake this wait.
  while (!done()) {
    if (left_ >= 0) return errorStatus(loomRemoteError, "rank {} left (its communicator went before this exchange)", left_);
    if (abort && abort->load()) return errorStatus(loomRemoteError, "aborted");
    if (deadline.expired()) {
      return errorStatus(loomTimeout, "{} of {} ranks arrived within the timeout", arrived_, nranks_);
    }
    changed_.wait_for(lock, std::chrono::milliseconds(deadline.remainingMs(50)));
  }
  return Status::Ok();
}

Status LocalExchange::allGather(int rank, const void* mine, void* all, size_t bytes, Deadline deadline,
                                const AbortFlag* abort) {
  std::unique_lock<std::mutex> lock(mutex_);
  LOOM_TRY(waitFor(lock, [&] { return !copying_; }, deadline, abort));  // the last round's table is read
  if (arrived_ == 0) {
    table_.resize(static_cast<size_t>(nranks_) * bytes);
    partBytes_ = bytes;
  } else if (bytes != partBytes_) {
    return invalidArgument("rank {} gathers {} bytes per rank, the others {}: the ranks run different setups", rank, bytes,
                           partBytes_);
  }
  std::memcpy(table_.data() + static_cast<size_t>(rank) * bytes, mine, bytes);
  const uint64_t round = round_;
  if (++arrived_ == nranks_) {
    copying_ = true;
    ++round_;
    changed_.notify_all();
  } else {
    LOOM_TRY(waitFor(lock, [&] { return round_ != round; }, deadline, abort));
  }
  lock.unlock();
  std::memcpy(all, table_.data(), table_.size());  // nobody writes the table until every rank copied it
  lock.lock();
  if (++copied_ == nranks_) {
    copied_ = arrived_ = 0;
    copying_ = false;
    changed_.notify_all();
  }
  return Status::Ok();
}

LocalExchange::Made LocalExchange::makeOnce(const std::string& name, const std::function<Made()>& make) {
  std::lock_guard<std::mutex> lock(madeMutex_);
  auto found = made_.find(name);
  if (found == made_.end()) found = made_.emplace(name, make()).first;
  return found->second;
}

void LocalExchange::leave(int rank) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (left_ < 0) left_ = rank;
  changed_.notify_all();
}

}  // namespace loom
