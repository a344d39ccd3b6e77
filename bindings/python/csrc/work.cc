#include "work.h"

#include <algorithm>

#include <ATen/record_function.h>
#include <c10/core/StreamGuard.h>
#include <c10/util/Exception.h>

#include "loom_error.h"
#include "op_names.h"

namespace loomtorch {

namespace {

c10::intrusive_ptr<c10::ivalue::Future> makeFuture(const std::optional<c10::Stream>& stream) {
  auto type = c10::ListType::create(c10::TensorType::get());
  if (!stream) return c10::make_intrusive<c10::ivalue::Future>(type);
  // A CUDA-aware future: then() callbacks and the users of its value get their streams ordered
  // after it, as with ProcessGroupNCCL's futures.
  return c10::make_intrusive<c10::ivalue::Future>(type, std::vector<c10::Device>{stream->device()});
}

// The profiler event's title, or none: for a coalesced block (its operations record theirs), and
// when nothing observes RecordFunctions (c10d::Work would allocate one per operation to find out).
const char* eventTitle(c10d::OpType type) {
  if (type == c10d::OpType::COALESCED || !at::hasCallbacks()) return nullptr;
  return profilingTitle(type);
}

}  // namespace

LoomWork::LoomWork(std::shared_ptr<Comm> comm, c10d::OpType type, std::chrono::milliseconds timeout,
                   std::vector<at::Tensor> outputs, std::vector<at::Tensor> keepAlive, std::function<void()> copyBack,
                   std::optional<c10::Stream> stream, const std::vector<at::Tensor>& profiled)
    : c10d::Work(comm->rank(), type, eventTitle(type), profiled),
      comm_(std::move(comm)),
      timeout_(timeout),
      outputs_(std::move(outputs)),
      keepAlive_(std::move(keepAlive)),
      copyBack_(std::move(copyBack)),
      future_(makeFuture(stream)) {
  if (stream) mark_.emplace(*stream);
}

std::string LoomWork::describe() const {
  return std::string(opName(opType_)) + " (operation " + std::to_string(opId()) + ")";
}

int LoomWork::sourceRank() const {
  TORCH_CHECK(source_, "Loom: sourceRank() is only known for a receive from any source (recv without src)");
  TORCH_CHECK(*source_ >= 0, "Loom: sourceRank() of ", describe(), " before it completed");
  return *source_;
}

void LoomWork::markOnStream() {
  if (!mark_) return;
  // The copy-backs follow the operation on its own stream, so that its results are stream-ordered
  // like NCCL's, however late the completion thread gets to this work.
  c10::StreamGuard guard(mark_->stream());
  if (copyBack_) {
    copyBack_();
    copyBack_ = nullptr;
  }
  mark_->record();
}

bool LoomWork::isCompleted() {
  if (c10d::Work::isCompleted()) return true;
  uint64_t id = opId();
  if (id == 0 || comm_->closed() || !streamPassed()) return false;
  loomResult_t r = comm_->waitOp(id, 0);  // just a test
  if (r == loomInProgress) return false;
  complete(r == loomSuccess ? nullptr : commError(r, describe(), comm_->get()));
  return c10d::Work::isCompleted();
}

bool LoomWork::wait(std::chrono::milliseconds timeout) {
  if (mark_ && timeout == kNoTimeout) {
    waitOnCurrentStream();
    return true;
  }
  if (!c10d::Work::isCompleted()) {
    uint64_t id = opId();
    TORCH_CHECK(id != 0, "Loom: wait() on an operation of a coalescing block that has not ended yet");
    // Loom fails an operation that makes no progress for the group's timeout (config.timeoutMs)
    // with a message naming the rank and step it waits for; the default limit here leaves it time
    // to do so, and only catches what would still be running afterwards.
    auto limit = timeout != kNoTimeout ? timeout : timeout_ + std::max(std::chrono::milliseconds(1000), timeout_ / 10);
    loomResult_t r = comm_->waitOp(id, limit.count());
    if (r == loomInProgress)  // worded as Gloo's, which scripts and tests look for
      C10_THROW_ERROR(DistBackendError, "Loom " + describe() + " on process group '" + comm_->name() +
                                            "': Timed out waiting " + std::to_string(limit.count()) +
                                            "ms for the operation to complete");
    std::exception_ptr error;
    if (r != loomSuccess) {
      error = commError(r, describe(), comm_->get());
    } else if (mark_) {
      try {
        mark_->synchronize();  // Loom is done: only the copies after its gate remain on the stream
      } catch (...) {
        error = std::current_exception();
      }
    }
    complete(error);
  }
  return c10d::Work::wait(kNoTimeout);  // waits for whoever completes it, rethrows its error
}

void LoomWork::waitOnCurrentStream() {
  if (!c10d::Work::isCompleted()) {
    TORCH_CHECK(opId() != 0, "Loom: wait() on an operation of a coalescing block that has not ended yet");
    mark_->blockCurrentStream();
  }
  // Loom reports a failed stream-ordered operation through the communicator, whose error also
  // fails every later call; the stream itself moves on with whatever the buffers hold.
  if (!comm_->closed()) {
    loomResult_t r = comm_->asyncError();
    if (r != loomSuccess && r != loomInProgress)
      throwError(commError(r, describe(), comm_->get()));
  }
  if (c10d::Work::isCompleted()) c10d::Work::wait(kNoTimeout);  // rethrows this operation's error
}

void LoomWork::synchronize() {
  // As WorkNCCL::synchronize: the current stream waits. CPU operations have no stream to order.
  if (mark_ && opId() != 0 && !c10d::Work::isCompleted()) mark_->blockCurrentStream();
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
  if (!error && copyBack_) {  // CPU operations; CUDA ones enqueued theirs in markOnStream
    try {
      copyBack_();
    } catch (...) {
      error = std::current_exception();
    }
  }
  copyBack_ = nullptr;
  keepAlive_.clear();
  children_.clear();
  // The future first, as ProcessGroupGloo's works do: a wait() that lost the race to complete returns
  // once finish() ran, and its caller may read the future's value right away.
  markFuture(error);
  finish(error);
}

void LoomWork::markFuture(std::exception_ptr error) {
  if (error) {
    future_->setError(error);
    return;
  }
  // A CUDA-aware future records an event on the current stream when marked. The operation's stream
  // passed it already; an idle pool stream keeps that event from also waiting for whatever the
  // current stream of this thread holds by now.
  c10::OptionalStreamGuard guard;
  if (mark_) guard.reset_stream(poolStream(mark_->stream().device()));
  future_->markCompleted(c10::IValue(outputs_));
}

}  // namespace loomtorch
