// The sending side of ib_comms.h's protocol.
#include <arpa/inet.h>

#include "transport/net/ib/ib_comms.h"
#include "transport/net/ib/verbs_errors.h"

namespace loom::net::ib {

Status IbSendComm::create(std::unique_ptr<IbEndpoint> endpoint, std::unique_ptr<IbSendComm>* out) {
  std::unique_ptr<IbSendComm> c(new IbSendComm(std::move(endpoint)));
  LOOM_TRY(c->fifoRegion_.registerOn(c->endpoint_->device(), c->fifo_.data(), c->fifo_.size() * sizeof(ClearToSend),
                                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
  *out = std::move(c);
  return Status::Ok();
}

IbSendComm::~IbSendComm() {
  endpoint_.reset();  // its QPs go first: nothing reads the buffers below any more
  for (Op& op : ops_) device_->registry().release(op.own);
}

Status IbSendComm::start() {
  for (int i = 0; i < 2 * kFifoSlots; ++i) LOOM_TRY(endpoint_->postRecv(0, workId(WorkKind::ClearToSendRecv, 0)));
  return Status::Ok();
}

Status IbSendComm::onCompletion(const ibv_wc& wc) {
  const WorkKind kind = workKind(wc.wr_id);
  const uint32_t slot = workSlot(wc.wr_id);
  if (kind == WorkKind::SendData && slot < ops_.size()) {
    Op& op = ops_[slot];
    if (wc.status != IBV_WC_SUCCESS) {
      op.state = State::Failed;
      op.error = fail(completionError(endpoint_->api(), wc, fmt::format("an RDMA write of {} bytes", op.bytes),
                                      endpoint_->peer()));
    } else if (op.tooLarge) {
      op.state = State::Failed;
      op.error = errorStatus(loomRemoteError,
                             "ib: a message of {} bytes for a receive of {} bytes posted by {} (the ranks disagree "
                             "about the operation)",
                             op.bytes, op.receiveCapacity, endpoint_->peer());
    } else {
      op.state = State::Done;
    }
    return Status::Ok();
  }
  if (kind == WorkKind::ClearToSendRecv) {
    if (wc.status != IBV_WC_SUCCESS) {
      fail(completionError(endpoint_->api(), wc, "a clear-to-send", endpoint_->peer()));
      return Status::Ok();
    }
    const uint32_t number = ntohl(wc.imm_data);
    cleared_[number % kFifoSlots] = number + 1;
    return endpoint_->postRecv(0, workId(WorkKind::ClearToSendRecv, 0));
  }
  return internalError("ib: a completion of unknown work {:#x} on a send comm", wc.wr_id);
}

Status IbSendComm::postCleared() {
  while (posted_ != next_) {
    const uint32_t slot = posted_ % kFifoSlots;
    if (cleared_[slot] != posted_ + 1) return Status::Ok();
    // The immediate's completion came after the entry was written: it is whole.
    const ClearToSend entry = fifo_[slot];
    Op& op = ops_[slot];
    ibv_sge sge{};
    ibv_send_wr wr{};
    wr.wr_id = workId(WorkKind::SendData, slot);
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(static_cast<uint32_t>(op.bytes));
    wr.wr.rdma.remote_addr = entry.address;
    wr.wr.rdma.rkey = entry.rkey;
    if (entry.capacity < op.bytes) {
      op.tooLarge = true;  // no data: the size alone tells the receiver
      op.receiveCapacity = entry.capacity;
    } else if (op.bytes > 0) {
      sge.addr = reinterpret_cast<uintptr_t>(op.data);
      sge.length = static_cast<uint32_t>(op.bytes);
      sge.lkey = op.lkey;
      wr.sg_list = &sge;
      wr.num_sge = 1;
    }
    LOOM_TRY(endpoint_->postSend(static_cast<int>(posted_ % static_cast<uint32_t>(endpoint_->qpCount())), &wr,
                                 "an RDMA write with immediate"));
    op.state = State::Posted;
    ++posted_;
  }
  return Status::Ok();
}

Status IbSendComm::progress() {
  LOOM_TRY(failure_);
  Status st = endpoint_->drain([this](const ibv_wc& wc) { return onCompletion(wc); });
  if (st.ok()) st = failure_;
  if (st.ok()) st = postCleared();
  return fail(st);
}

bool IbSendComm::somethingToReport() const {
  if (!failure_.ok()) return true;
  for (const Op& op : ops_)
    if (op.state == State::Done || op.state == State::Failed) return true;
  return false;
}

Status IbSendComm::isend(const void* data, size_t bytes, int tag, MemoryRegion* region, Request** request) {
  (void)tag;
  *request = nullptr;
  LOOM_TRY(failure_);
  if (bytes > (size_t{1} << 31) - 1)
    return invalidArgument("ib: a message of {} bytes exceeds the provider's {} bytes", bytes, (size_t{1} << 31) - 1);
  Op& op = ops_[next_ % kFifoSlots];
  if (op.state != State::Free) return Status::Ok();
  Registration* use = nullptr;
  LOOM_TRY(registrationFor(region, data, bytes, &use, &op.own));
  op.data = data;
  op.bytes = bytes;
  op.lkey = use->lkey();
  op.tooLarge = false;
  op.error = Status::Ok();
  op.state = State::WaitsForClearance;
  ++next_;
  *request = reinterpret_cast<Request*>(&op);
  // Errors are the request's to report (test), as for a message that fails later.
  (void)progress();
  return Status::Ok();
}

Status IbSendComm::test(Request* request, bool* done, size_t* sizes) {
  *done = false;
  Op& op = *reinterpret_cast<Op*>(request);
  const Status st = progress();
  if (op.state == State::Done || op.state == State::Failed) {
    const Status result = op.state == State::Done ? Status::Ok() : op.error;
    if (op.state == State::Done && sizes) *sizes = op.bytes;
    endpoint_->device().registry().release(op.own);
    op = Op{};
    *done = result.ok();
    return result;
  }
  LOOM_TRY(st);
  return endpoint_->peerAlive();
}

}  // namespace loom::net::ib
