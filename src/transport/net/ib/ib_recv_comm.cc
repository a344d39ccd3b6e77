// The receiving side of ib_comms.h's protocol.
#include <arpa/inet.h>

#include "transport/net/ib/ib_comms.h"
#include "transport/net/ib/verbs_errors.h"

namespace loom::net::ib {

Status IbRecvComm::create(std::unique_ptr<IbEndpoint> endpoint, std::unique_ptr<IbRecvComm>* out) {
  std::unique_ptr<IbRecvComm> c(new IbRecvComm(std::move(endpoint)));
  LOOM_TRY(c->outgoingRegion_.registerOn(c->endpoint_->device(), c->outgoing_.data(),
                                         c->outgoing_.size() * sizeof(ClearToSend), IBV_ACCESS_LOCAL_WRITE));
  *out = std::move(c);
  return Status::Ok();
}

IbRecvComm::~IbRecvComm() {
  flushEndpoint_.reset();
  endpoint_.reset();  // its QPs go first: nothing writes the buffers below any more
  for (Op& op : ops_) device_->registry().release(op.own);
}

Status IbRecvComm::onCompletion(const ibv_wc& wc) {
  const WorkKind kind = workKind(wc.wr_id);
  const uint32_t slot = workSlot(wc.wr_id);
  if (slot >= ops_.size() || (kind != WorkKind::ReceiveData && kind != WorkKind::ClearToSendWrite))
    return internalError("ib: a completion of unknown work {:#x} on a receive comm", wc.wr_id);
  Op& op = ops_[slot];
  if (kind == WorkKind::ClearToSendWrite) {
    op.clearanceInFlight = false;
    if (wc.status != IBV_WC_SUCCESS)
      fail(completionError(endpoint_->api(), wc, "the RDMA write of a clear-to-send", endpoint_->peer()));
    return Status::Ok();
  }
  if (wc.status != IBV_WC_SUCCESS) {
    op.state = State::Failed;
    op.error = fail(completionError(endpoint_->api(), wc, "a receive", endpoint_->peer()));
    return Status::Ok();
  }
  const uint32_t bytes = ntohl(wc.imm_data);
  if (bytes > op.capacity) {
    op.state = State::Failed;
    op.error = errorStatus(loomRemoteError,
                           "ib: a message of {} bytes from {} for a receive of {} bytes (the ranks disagree about "
                           "the operation)",
                           bytes, endpoint_->peer(), op.capacity);
    return Status::Ok();
  }
  op.bytes = bytes;
  op.state = State::Done;
  return Status::Ok();
}

Status IbRecvComm::progress() {
  LOOM_TRY(failure_);
  Status st = endpoint_->drain([this](const ibv_wc& wc) { return onCompletion(wc); });
  if (st.ok() && flushEndpoint_)
    st = flushEndpoint_->drain([this](const ibv_wc& wc) {
      if (workKind(wc.wr_id) != WorkKind::Flush) return internalError("ib: a completion of unknown work {:#x} on a flush QP", wc.wr_id);
      flush_.state = wc.status == IBV_WC_SUCCESS ? State::Done : State::Failed;
      if (wc.status != IBV_WC_SUCCESS)
        flush_.error = fail(completionError(endpoint_->api(), wc, "the flush read of received GPU memory", "its own flush QP"));
      return Status::Ok();
    });
  if (st.ok()) st = failure_;
  return fail(st);
}

Status IbRecvComm::arm() {
  LOOM_TRY(endpoint_->arm());
  return flushEndpoint_ && flush_.held ? flushEndpoint_->arm() : Status::Ok();
}

void IbRecvComm::addMoreWaits(WaitList* waits) {
  if (flushEndpoint_ && flush_.held) flushEndpoint_->addWaits(waits);
}

bool IbRecvComm::somethingToReport() const {
  if (!failure_.ok()) return true;
  if (flush_.held && flush_.state != State::Posted) return true;
  for (const Op& op : ops_)
    if (op.held && op.state != State::Posted) return true;
  return false;
}

Status IbRecvComm::irecv(int n, void* const* data, const size_t* sizes, const int* tags, MemoryRegion* const* regions,
                         Request** request) {
  *request = nullptr;
  LOOM_TRY(failure_);
  if (n != 1) return invalidArgument("the ib provider takes one buffer per receive, not {}", n);
  const uint32_t slot = next_ % kFifoSlots;
  Op& op = ops_[slot];
  if (op.held || op.clearanceInFlight) return Status::Ok();
  Registration* use = nullptr;
  Registration* own = nullptr;
  LOOM_TRY(registrationFor(regions ? regions[0] : nullptr, data[0], sizes[0], &use, &own));
  const int qp = static_cast<int>(next_ % static_cast<uint32_t>(endpoint_->qpCount()));
  Status st = endpoint_->postRecv(qp, workId(WorkKind::ReceiveData, slot));
  if (st.ok()) {
    ClearToSend& entry = outgoing_[slot];
    entry.address = reinterpret_cast<uintptr_t>(data[0]);
    entry.capacity = sizes[0];
    entry.rkey = use->rkey();
    entry.tag = tags ? tags[0] : 0;
    entry.number = next_ + 1;
    ibv_sge sge{};
    sge.addr = reinterpret_cast<uintptr_t>(&entry);
    sge.length = sizeof entry;
    sge.lkey = outgoingRegion_.mr()->lkey;
    ibv_send_wr wr{};
    wr.wr_id = workId(WorkKind::ClearToSendWrite, slot);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(next_);
    wr.wr.rdma.remote_addr = peerFifo_ + slot * sizeof(ClearToSend);
    wr.wr.rdma.rkey = peerFifoRkey_;
    st = endpoint_->postSend(0, &wr, "the RDMA write of a clear-to-send");
  }
  if (!st.ok()) {
    device_->registry().release(own);
    return fail(st);  // a receive may already be posted: the connection is of no further use
  }
  op.held = true;
  op.clearanceInFlight = true;
  op.state = State::Posted;
  op.capacity = sizes[0];
  op.bytes = 0;
  op.own = own;
  op.error = Status::Ok();
  ++next_;
  *request = reinterpret_cast<Request*>(&op);
  return Status::Ok();
}

Status IbRecvComm::iflush(int n, void* const* data, const size_t* sizes, MemoryRegion* const* regions,
                          Request** request) {
  *request = nullptr;
  LOOM_TRY(failure_);
  if (endpoint_->config().gdrFlushDisable || !regions) return Status::Ok();
  // Reading the last GPU buffer that received bytes is enough: the NIC wrote the buffers in order.
  const Registration* target = nullptr;
  const void* address = nullptr;
  for (int i = 0; i < n; ++i) {
    const auto* r = reinterpret_cast<const Registration*>(regions[i]);
    if (r && r->gpu && sizes[i] > 0 && r->covers(data[i], 1)) target = r, address = data[i];
  }
  if (!target) return Status::Ok();  // host memory: nothing to make visible
  if (flush_.held) return invalidArgument("ib: a flush is still in flight on the receive comm from {}", endpoint_->peer());
  if (!flushEndpoint_) {
    std::unique_ptr<IbEndpoint> e;
    LOOM_TRY(endpoint_->createLoopback(&e));
    LOOM_TRY(flushRegion_.registerOn(e->device(), &flushByte_, 1, IBV_ACCESS_LOCAL_WRITE));
    flushEndpoint_ = std::move(e);
  }
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(&flushByte_);
  sge.length = 1;
  sge.lkey = flushRegion_.mr()->lkey;
  ibv_send_wr wr{};
  wr.wr_id = workId(WorkKind::Flush, 0);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(address);
  wr.wr.rdma.rkey = target->rkey();
  LOOM_TRY(fail(flushEndpoint_->postSend(0, &wr, "the flush read of received GPU memory")));
  flush_ = Flush{true, State::Posted, Status::Ok()};
  *request = reinterpret_cast<Request*>(&flush_);
  return Status::Ok();
}

Status IbRecvComm::testFlush(bool* done) {
  const Status st = progress();
  if (flush_.state == State::Posted) return st;
  const Status result = flush_.state == State::Done ? Status::Ok() : flush_.error;
  flush_ = Flush{};
  *done = result.ok();
  return result;
}

Status IbRecvComm::test(Request* request, bool* done, size_t* sizes) {
  *done = false;
  if (request == reinterpret_cast<Request*>(&flush_)) {
    if (sizes) *sizes = 0;
    return testFlush(done);
  }
  Op& op = *reinterpret_cast<Op*>(request);
  const Status st = progress();
  if (op.state != State::Posted) {
    const Status result = op.state == State::Done ? Status::Ok() : op.error;
    if (op.state == State::Done && sizes) *sizes = op.bytes;
    device_->registry().release(op.own);
    op.own = nullptr;
    op.held = false;
    op.state = State::Posted;
    *done = result.ok();
    return result;
  }
  LOOM_TRY(st);
  return endpoint_->peerAlive();
}

}  // namespace loom::net::ib
