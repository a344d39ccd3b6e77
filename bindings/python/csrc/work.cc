#include "work.h"

#include <algorithm>

#include <c10/util/Exception.h>

#include "loom_error.h"

namespace loomtorch {

LoomWork::LoomWork(std::shared_ptr<Comm> comm, c10d::OpType type, std::chrono::milliseconds timeout,
                   std::vector<at::Tensor> outputs, std::vector<at::Tensor> keepAlive, std::function<void()> onSuccess)
    : c10d::Work(comm->rank(), type),
      comm_(std::move(comm)),
      timeout_(timeout),
      outputs_(std::move(outputs)),
      keepAlive_(std::move(keepAlive)),
      onSuccess_(std::move(onSuccess)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

bool LoomWork::isCompleted() {
  if (c10d::Work::isCompleted()) return true;
  uint64_t id = opId();
  if (id == 0 || comm_->closed()) return false;
  loomResult_t r = comm_->waitOp(id, 0);  // just a test
  if (r == loomInProgress) return false;
  complete(r == loomSuccess ? nullptr : commError(r, "operation " + std::to_string(id), comm_->get()));
  return c10d::Work::isCompleted();
}

bool LoomWork::wait(std::chrono::milliseconds timeout) {
  if (!c10d::Work::isCompleted()) {
    uint64_t id = opId();
    TORCH_CHECK(id != 0, "Loom: wait() on an operation of a coalescing block that has not ended yet");
    // Loom fails an operation that makes no progress for the group's timeout (config.timeoutMs)
    // with a message naming the rank and step it waits for; the default limit here leaves it time
    // to do so, and only catches what would still be running afterwards.
    auto limit = timeout != kNoTimeout ? timeout : timeout_ + std::max(std::chrono::milliseconds(1000), timeout_ / 10);
    loomResult_t r = comm_->waitOp(id, limit.count());
    if (r == loomInProgress)
      C10_THROW_ERROR(DistBackendError, "Loom: operation " + std::to_string(id) + " on process group '" +
                                            comm_->name() + "' did not complete within " +
                                            std::to_string(limit.count()) + " ms");
    complete(r == loomSuccess ? nullptr : commError(r, "operation " + std::to_string(id), comm_->get()));
  }
  return c10d::Work::wait(kNoTimeout);  // waits for whoever completes it, rethrows its error
}

void LoomWork::complete(std::exception_ptr error) {
  if (finishing_.exchange(true)) return;
  for (auto& child : children_) {
    child->complete(error);
    try {
      child->c10d::Work::wait(kNoTimeout);
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  if (!error && onSuccess_) {
    try {
      onSuccess_();
    } catch (...) {
      error = std::current_exception();
    }
  }
  onSuccess_ = nullptr;
  keepAlive_.clear();
  children_.clear();
  finish(error);
  if (error)
    future_->setError(error);
  else
    future_->markCompleted(c10::IValue(outputs_));
}

}  // namespace loomtorch
