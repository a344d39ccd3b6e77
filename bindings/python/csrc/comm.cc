#include "comm.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include <c10/util/Exception.h>

#include "loom_error.h"

namespace loomtorch {

namespace {

// Loom's id for this communicator, through the store. A group name is reused after
// destroy_process_group (and a FileStore may outlive a run), so each creation takes a fresh
// generation number: every member adds 1 to one counter, and creation k is the k-th batch of
// `size` additions (a creation finishes only when all members have joined it).
loomUniqueId exchangeUniqueId(c10d::Store& store, int rank, int size, const std::string& name, int64_t* generation) {
  const std::string prefix = "loom/" + name + "/";
  int64_t joined = store.add(prefix + "joined", 1);
  *generation = (joined - 1) / size;
  const std::string key = prefix + "unique_id/" + std::to_string(*generation);
  loomUniqueId id;
  if (rank == 0) {
    checkCall(loomGetUniqueId(&id), "loomGetUniqueId");
    const auto* bytes = reinterpret_cast<const uint8_t*>(id.internal);
    store.set(key, std::vector<uint8_t>(bytes, bytes + sizeof(id.internal)));
  } else {
    std::vector<uint8_t> bytes = store.get(key);
    TORCH_CHECK(bytes.size() == sizeof(id.internal), "Loom: the unique id in the store has ", bytes.size(),
                " bytes, expected ", sizeof(id.internal));
    std::memcpy(id.internal, bytes.data(), bytes.size());
  }
  return id;
}

}  // namespace

Comm::Comm(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds timeout,
           const std::string& name)
    : rank_(rank), size_(size), timeout_(timeout), name_(name) {
  int64_t generation = 0;
  loomUniqueId id = exchangeUniqueId(*store, rank, size, name, &generation);
  storePrefix_ = "loom/" + name + "/" + std::to_string(generation) + "/";
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = name_.c_str();
  config.timeoutMs = static_cast<int>(std::clamp<int64_t>(timeout.count(), 1, INT_MAX));
  checkCall(loomCommInitRankConfig(&comm_, size, id, rank, &config), "loomCommInitRankConfig");
}

Comm::Comm(loomComm_t adopted, std::chrono::milliseconds timeout, const std::string& name, const std::string& storePrefix)
    : comm_(adopted), rank_(0), size_(0), timeout_(timeout), name_(name), storePrefix_(storePrefix) {
  checkCall(loomCommUserRank(comm_, &rank_), "loomCommUserRank");
  checkCall(loomCommCount(comm_, &size_), "loomCommCount");
}

Comm::~Comm() { close(false); }

loomComm_t Comm::get() const {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(comm_ != nullptr, "Loom: process group '", name_, "' was shut down or aborted");
  return comm_;
}

uint64_t Comm::lastOpId() const {
  uint64_t id = 0;
  checkCall(loomCommLastOpId(get(), &id), "loomCommLastOpId");
  return id;
}

loomResult_t Comm::waitOp(uint64_t id, int64_t timeoutMs) const { return loomCommWaitOp(get(), id, timeoutMs); }

loomResult_t Comm::asyncError() const {
  loomResult_t error = loomSuccess;
  checkCall(loomCommGetAsyncError(get(), &error), "loomCommGetAsyncError");
  return error;
}

void Comm::close(bool abort) {
  loomComm_t comm;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    comm = comm_;
    comm_ = nullptr;
  }
  if (!comm) return;
  if (abort) {
    loomCommAbort(comm);
  } else {
    loomCommFinalize(comm);  // flushes queued operations (or reports the error that stopped them)
    loomCommDestroy(comm);
  }
}

bool Comm::closed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return comm_ == nullptr;
}

}  // namespace loomtorch
