// One Loom communicator for one process group: joined through the group's c10d Store, always
// nonblocking (config.blocking = 0), so every call queues its operation and returns at once.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <loom.h>

namespace loomtorch {

class Comm {
 public:
  // Rank 0 makes the unique id and publishes it in `store`; the others read it (store.get blocks).
  Comm(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds timeout,
       const std::string& name);
  // Takes over `adopted` (made by loomCommShrink of the group `parent`), its store keys under
  // `storePrefix`.
  Comm(loomComm_t adopted, std::chrono::milliseconds timeout, const std::string& name, const std::string& storePrefix);
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  // The live communicator; throws once it was closed.
  loomComm_t get() const;
  int rank() const { return rank_; }
  int size() const { return size_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  const std::string& name() const { return name_; }
  // Store keys under this prefix belong to this creation of the group alone.
  const std::string& storePrefix() const { return storePrefix_; }

  uint64_t lastOpId() const;
  // loomCommWaitOp: loomSuccess, loomInProgress when timeoutMs passed, or the communicator's error.
  loomResult_t waitOp(uint64_t id, int64_t timeoutMs) const;
  // loomCommGetAsyncError: loomSuccess, or the error that broke the communicator.
  loomResult_t asyncError() const;

  // Frees the communicator (after its queued work finished) or aborts it; idempotent.
  void close(bool abort);
  bool closed() const;

 private:
  loomComm_t comm_ = nullptr;
  int rank_, size_;
  std::chrono::milliseconds timeout_;
  std::string name_;
  std::string storePrefix_;
  mutable std::mutex mutex_;
};

}  // namespace loomtorch
