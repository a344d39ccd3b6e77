#include "transport/net/ucx/ucx_comms.h"

#include <algorithm>

#include "base/clock.h"
#include "base/log.h"

namespace loom::net::ucx {

namespace {

// How long closing an endpoint may take to push out what was sent before (a peer that is gone
// cannot take it).
constexpr int64_t kCloseFlushMs = 500;

const char kHostRegion = 0;  // any non-null value would do: nothing is registered

}  // namespace

Status registerHostMemory(int pointerKind, MemoryRegion** region) {
  if (pointerKind != kHostPointers)
    return invalidArgument("this UCX build sends host memory only (pointer kind {})", pointerKind);
  *region = reinterpret_cast<MemoryRegion*>(const_cast<char*>(&kHostRegion));
  return Status::Ok();
}

UcxLink::UcxLink(std::shared_ptr<UcxWorker> worker, uint64_t tag, bool sending)
    : worker_(std::move(worker)), tag_(tag), sending_(sending) {}

UcxLink::~UcxLink() {
  const bool clean = failure_ == UCS_OK && std::none_of(ops_.begin(), ops_.end(), [&](const Op& op) {
    return op.inUse && !op.receive;
  });
  if (ep_ && sending_ && clean) {
    // The receiver's pending receive learns that no message will come (as at a socket's end); the
    // flush makes sure it, and every message before it, arrived before the endpoint goes.
    ucp_request_param_t param{};
    ucs_status_ptr_t bye = ucp_tag_send_nbx(ep_, nullptr, 0, tag_ | kGoodbyeBit, &param);
    if (UCS_PTR_IS_PTR(bye)) ucp_request_free(bye);
    ucs_status_ptr_t flush = ucp_ep_flush_nbx(ep_, &param);
    const Deadline deadline = Deadline::afterMs(kCloseFlushMs);
    while (UCS_PTR_IS_PTR(flush) && ucp_request_check_status(flush) == UCS_INPROGRESS && !deadline.expired())
      worker_->progress();
    if (UCS_PTR_IS_PTR(flush)) ucp_request_free(flush);  // released by UCX once it ends
  }
  for (Op& op : ops_) {
    if (!op.inUse || !op.ucx) continue;
    ucp_request_cancel(worker_->worker(), op.ucx);
    ucp_request_free(op.ucx);
  }
  if (!ep_) return;
  // Forced: what had to arrive was flushed above, and a peer that is gone cannot hold the close up.
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  ucs_status_ptr_t close = ucp_ep_close_nbx(ep_, &param);
  while (UCS_PTR_IS_PTR(close) && ucp_request_check_status(close) == UCS_INPROGRESS) worker_->progress();
  if (UCS_PTR_IS_PTR(close)) ucp_request_free(close);
}

void UcxLink::onEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status) {
  (void)ep;
  auto* link = static_cast<UcxLink*>(arg);
  if (link->failure_ == UCS_OK) link->failure_ = status;
}

Status UcxLink::connectTo(const std::vector<char>& peerAddress) {
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(peerAddress.data());
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = &UcxLink::onEndpointError;
  params.err_handler.arg = this;
  const ucs_status_t st = ucp_ep_create(worker_->worker(), &params, &ep_);
  return st == UCS_OK ? Status::Ok() : ucxError("ucp_ep_create", st);
}

UcxLink::Op* UcxLink::freeOp() {
  auto it = std::find_if(ops_.begin(), ops_.end(), [](const Op& op) { return !op.inUse; });
  return it == ops_.end() ? nullptr : &*it;
}

Status UcxLink::finish(Op& op, ucs_status_ptr_t result, const char* call, Request** request) {
  if (UCS_PTR_IS_ERR(result)) return ucxError(call, UCS_PTR_STATUS(result));
  op.inUse = true;
  op.ucx = UCS_PTR_IS_PTR(result) ? result : nullptr;  // null: a send done at once
  op.status = UCS_OK;
  *request = reinterpret_cast<Request*>(&op);
  return Status::Ok();
}

Status UcxLink::send(const void* data, size_t bytes, Request** request) {
  *request = nullptr;
  if (failure_ != UCS_OK) return ucxError("the connection", failure_);
  Op* op = freeOp();
  if (!op) return Status::Ok();
  op->receive = false;
  op->bytes = bytes;
  ucp_request_param_t param{};
  return finish(*op, ucp_tag_send_nbx(ep_, data, bytes, tag_, &param), "ucp_tag_send_nbx", request);
}

Status UcxLink::receive(void* data, size_t bytes, Request** request) {
  *request = nullptr;
  if (failure_ != UCS_OK) return ucxError("the connection", failure_);
  Op* op = freeOp();
  if (!op) return Status::Ok();
  op->receive = true;
  op->info = ucp_tag_recv_info_t{};
  // Always a request: UCX 1.13 leaves recv_info unset when a receive completes at once, and the
  // message's length is what tells a message from a failure notice.
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  return finish(*op, ucp_tag_recv_nbx(worker_->worker(), data, bytes, tag_, ~kGoodbyeBit, &param), "ucp_tag_recv_nbx",
                request);
}

Status UcxLink::test(Request* request, bool* done, size_t* sizes) {
  *done = false;
  Op& op = *reinterpret_cast<Op*>(request);
  worker_->progress();
  if (op.ucx) {
    const ucs_status_t st = op.receive ? ucp_tag_recv_request_test(op.ucx, &op.info) : ucp_request_check_status(op.ucx);
    if (st == UCS_INPROGRESS) {
      // A receive has no endpoint of its own: the peer's failure reaches it through ours.
      if (failure_ != UCS_OK) return ucxError("the connection", failure_);
      return Status::Ok();
    }
    ucp_request_free(op.ucx);
    op.ucx = nullptr;
    op.status = st;
  }
  op.inUse = false;
  if (op.status != UCS_OK) return ucxError(op.receive ? "a receive" : "a send", op.status);
  if (op.receive && (op.info.sender_tag & kGoodbyeBit))
    return Status(loomRemoteError, "ucx: the connection was closed by the peer (did it exit or abort?)");
  if (sizes) *sizes = op.receive ? op.info.length : op.bytes;
  *done = true;
  return Status::Ok();
}

Status UcxSendComm::isend(const void* data, size_t bytes, int tag, MemoryRegion* region, Request** request) {
  (void)tag, (void)region;  // one receive per message: the connection's tag is the match
  return link_->send(data, bytes, request);
}

Status UcxRecvComm::irecv(int n, void* const* data, const size_t* sizes, const int* tags, MemoryRegion* const* regions,
                          Request** request) {
  (void)tags, (void)regions;
  *request = nullptr;
  if (n != 1) return invalidArgument("the ucx provider takes one buffer per receive, not {}", n);
  return link_->receive(data[0], sizes[0], request);
}

Status UcxRecvComm::iflush(int n, void* const* data, const size_t* sizes, MemoryRegion* const* regions,
                           Request** request) {
  (void)n, (void)data, (void)sizes, (void)regions;
  *request = nullptr;  // host memory only
  return Status::Ok();
}

}  // namespace loom::net::ucx
