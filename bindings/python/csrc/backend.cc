#include "backend.h"

#include <dlfcn.h>

#include <algorithm>
#include <climits>

#include <c10/util/Exception.h>

#include "loom_error.h"

namespace loomtorch {

namespace {
// Loom's groups are per thread: while one process group coalesces on this thread, an operation of
// another would silently join its Loom group.
thread_local const LoomBackend* tlsCoalescing = nullptr;
}  // namespace

void grouped(const std::function<void()>& calls) {
  checkCall(loomGroupStart(), "loomGroupStart");
  try {
    calls();
  } catch (...) {
    loomGroupEnd();
    throw;
  }
  checkCall(loomGroupEnd(), "loomGroupEnd");
}

LoomBackend::LoomBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                         std::chrono::milliseconds timeout, const std::string& groupName)
    : c10d::Backend(rank, size),
      store_(store),
      comm_(std::make_shared<Comm>(store, rank, size, timeout, "torch:" + groupName)),
      completer_(std::make_unique<Completer>(comm_)),
      monitored_(store, rank, size, comm_->storePrefix()) {
  init();
}

LoomBackend::LoomBackend(const c10::intrusive_ptr<c10d::Store>& store, std::shared_ptr<Comm> comm)
    : c10d::Backend(comm->rank(), comm->size()),
      store_(store),
      comm_(std::move(comm)),
      completer_(std::make_unique<Completer>(comm_)),
      monitored_(store, comm_->rank(), comm_->size(), comm_->storePrefix()) {
  init();
}

c10::intrusive_ptr<c10d::Backend> LoomBackend::shrink(const std::vector<int64_t>& ranksToExclude, int shrinkFlags,
                                                      const c10::intrusive_ptr<Options>& /*optsOverride*/) {
  TORCH_CHECK(!coalescing_, "Loom: shrink inside a coalescing block");
  std::vector<int> excluded;
  for (int64_t r : ranksToExclude) {
    TORCH_CHECK(r >= 0 && r < size_, "Loom shrink: rank ", r, " is outside 0..", size_ - 1);
    excluded.push_back(static_cast<int>(r));
  }
  static_assert(LOOM_SHRINK_ABORT == 1, "torch's SHRINK_ABORT");
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.blocking = 0;  // as every group's communicator (comm.h)
  const std::string name = comm_->name() + ":shrunk";
  config.commName = name.c_str();
  config.timeoutMs = static_cast<int>(std::clamp<int64_t>(comm_->timeout().count(), 1, INT_MAX));
  loomComm_t child = nullptr;
  // The parent's queued works end first (with SHRINK_ABORT, failed): loomCommShrink waits for them.
  checkCall(loomCommShrink(comm_->get(), excluded.data(), static_cast<int>(excluded.size()), &child, &config, shrinkFlags),
            "loomCommShrink");
  // A new key space in the store for the child's monitored barrier: one per shrink of this group.
  const std::string prefix = comm_->storePrefix() + "shrink/" + std::to_string(shrinks_++) + "/";
  return c10::make_intrusive<LoomBackend>(store_, std::make_shared<Comm>(child, comm_->timeout(), name, prefix));
}

LoomBackend::~LoomBackend() { shutdown(); }

void LoomBackend::shutdown() {
  completer_->stop(false);  // completes the queued works first
  comm_->close(false);
}

void LoomBackend::abort() {
  completer_->stop(true);
  comm_->close(true);
}

int LoomBackend::checkRoot(int64_t root, const char* what) const {
  // Loom itself refuses a bad root with its own message; this only keeps the int conversion exact.
  TORCH_CHECK(root >= INT32_MIN && root <= INT32_MAX, "Loom ", what, ": root ", root, " is out of range");
  return static_cast<int>(root);
}

c10::intrusive_ptr<c10d::Work> LoomBackend::issue(Op op, const Calls& calls) {
  std::lock_guard<std::mutex> lock(issueMutex_);
  TORCH_CHECK(tlsCoalescing == nullptr || tlsCoalescing == this,
              "Loom: another process group is coalescing operations on this thread");
  loomComm_t comm = comm_->get();
  CallStream stream(op.device);
  if (coalescing_) checkBlockStream(op.device, stream);
  uint64_t before = comm_->lastOpId();
  calls(comm, stream.loom(), op.redOps);
  if (op.type != c10d::OpType::SEND && op.type != c10d::OpType::RECV && op.type != c10d::OpType::RECVANYSOURCE)
    ++sequence_;
  auto timeout = op.timeout == c10d::kUnsetTimeout ? comm_->timeout() : op.timeout;
  auto work = c10::make_intrusive<LoomWork>(comm_, op.type, timeout, std::move(op.outputs), op.staging.takeKeepAlive(),
                                            op.staging.takeCopyBack(), stream.cuda(), op.profiled);
  if (coalescing_) {
    coalesced_.push_back(work);  // its op id and its mark on the stream follow at endCoalescing
    coalescedRedOps_.append(std::move(op.redOps));
    return work;
  }
  op.redOps.release();
  work->markOnStream();
  uint64_t after = comm_->lastOpId();
  if (after == before) {
    work->complete(nullptr);  // nothing was queued (no Loom call was needed)
  } else {
    work->assignOpId(after);
    // A small CPU operation has usually completed already (Loom starts it on this thread when nothing
    // is queued ahead): finish its Work here rather than through the completion thread, one wake-up
    // less for whoever waits on it.
    if (!stream.cuda() && comm_->waitOp(after, 0) == loomSuccess)
      work->complete(nullptr);
    else
      completer_->push(work);
  }
  return work;
}

void LoomBackend::checkBlockStream(c10::Device device, const CallStream& stream) {
  if (!blockDevice_) {
    blockDevice_ = device;
    blockStream_ = stream.cuda();
    return;
  }
  TORCH_CHECK(device == *blockDevice_, "Loom: one coalescing block takes tensors on one device, got ", *blockDevice_,
              " and ", device);
  TORCH_CHECK(stream.cuda() == blockStream_,
              "Loom: the operations of one coalescing block must be issued on one CUDA stream; the current stream "
              "changed inside the block");
}

void LoomBackend::startCoalescing() {
  std::lock_guard<std::mutex> lock(issueMutex_);
  TORCH_CHECK(!coalescing_, "Loom: startCoalescing while already coalescing");
  TORCH_CHECK(tlsCoalescing == nullptr, "Loom: another process group is coalescing operations on this thread");
  comm_->get();
  checkCall(loomGroupStart(), "loomGroupStart");
  coalescing_ = true;
  tlsCoalescing = this;
}

c10::intrusive_ptr<c10d::Work> LoomBackend::endCoalescing() {
  std::lock_guard<std::mutex> lock(issueMutex_);
  TORCH_CHECK(coalescing_, "Loom: endCoalescing without startCoalescing");
  coalescing_ = false;
  tlsCoalescing = nullptr;
  std::vector<c10::intrusive_ptr<LoomWork>> works;
  works.swap(coalesced_);
  RedOps redOps = std::move(coalescedRedOps_);
  std::optional<c10::Stream> stream = blockStream_;
  blockDevice_.reset();
  blockStream_.reset();
  std::vector<at::Tensor> outputs;
  for (const auto& w : works) outputs.insert(outputs.end(), w->outputs().begin(), w->outputs().end());
  auto all = c10::make_intrusive<LoomWork>(comm_, c10d::OpType::COALESCED, comm_->timeout(), std::move(outputs),
                                           std::vector<at::Tensor>{}, nullptr, stream);
  for (const auto& w : works) all->addChild(w);
  uint64_t before = comm_->lastOpId();
  loomResult_t r;
  {
    // The block's CUDA operations are enqueued on their stream now.
    c10::OptionalDeviceGuard guard(stream ? std::optional<c10::Device>(stream->device()) : std::nullopt);
    r = loomGroupEnd();
  }
  redOps.release();
  if (r != loomSuccess) {
    auto error = loomError(r, "loomGroupEnd", loomGetLastError(nullptr));
    all->complete(error);
    std::rethrow_exception(error);
  }
  for (const auto& w : works) w->markOnStream();
  all->markOnStream();  // after its children's marks: passing it means the whole block passed
  uint64_t after = comm_->lastOpId();
  if (after == before && works.empty()) {
    all->complete(nullptr);
    return all;
  }
  for (const auto& w : works) {
    w->assignOpId(after);
    completer_->push(w);
  }
  all->assignOpId(after);
  completer_->push(all);
  return all;
}

c10::intrusive_ptr<c10d::Work> LoomBackend::barrier(const c10d::BarrierOptions& opts) {
  // A one-byte allreduce on the CPU: on a Loom communicator it starts after everything issued before
  // it (CUDA operations included, once their stream reached them), and wait() blocks the host.
  Op op{c10d::OpType::BARRIER, opts.timeout, {}, {}, {}};
  at::Tensor token = op.staging.input(at::zeros({1}, at::kByte));
  return issue(std::move(op), [&](loomComm_t comm, loomStream_t stream, RedOps&) {
    checkCall(loomAllReduce(token.data_ptr(), token.data_ptr(), 1, loomUint8, loomSum, comm, stream), "barrier");
  });
}

void LoomBackend::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  monitored_.run(opts.timeout == c10d::kUnsetTimeout ? comm_->timeout() : opts.timeout, waitAllRanks);
}

std::string LoomBackend::libraryPath() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&loomGetVersion), &info) && info.dli_fname) return info.dli_fname;
  return "";
}

}  // namespace loomtorch
