// The ucx provider's comms: tagged sends on an endpoint to the receiver's worker, tagged receives on
// the worker, one 64-bit tag per connection (the receiver's choice, in the handle), so messages of a
// connection match in posting order. Each side also holds an endpoint to the other with UCX's peer
// error handling, so that a peer that dies fails this side's requests instead of leaving them pending.
#pragma once

#include <ucp/api/ucp.h>

#include <array>
#include <memory>
#include <string>

#include "transport/net/provider.h"
#include "transport/net/ucx/ucx_worker.h"

namespace loom::net::ucx {

// The tag's lowest bit marks a sender's goodbye (sent when its comm closes), so that a receive waiting
// for a message that will never come fails; tags are made with the bit clear.
inline constexpr uint64_t kGoodbyeBit = 1;

// What both comms have: the worker, the endpoint to the peer, the tag, the requests, the failure.
class UcxLink {
 public:
  UcxLink(std::shared_ptr<UcxWorker> worker, uint64_t tag, bool sending);
  ~UcxLink();
  UcxLink(const UcxLink&) = delete;
  UcxLink& operator=(const UcxLink&) = delete;

  // Creates the endpoint to the peer's worker address (peer error handling on).
  Status connectTo(const std::vector<char>& peerAddress);
  Status send(const void* data, size_t bytes, Request** request);
  Status receive(void* data, size_t bytes, Request** request);
  Status test(Request* request, bool* done, size_t* sizes);
  void addWaits(WaitList* waits) { worker_->addWaits(waits); }

 private:
  struct Op {
    bool inUse = false;
    bool receive = false;
    void* ucx = nullptr;  // UCX's request, null once complete
    ucs_status_t status = UCS_OK;
    ucp_tag_recv_info_t info{};
    size_t bytes = 0;
  };
  static void onEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status);
  Op* freeOp();
  Status finish(Op& op, ucs_status_ptr_t result, const char* call, Request** request);

  std::shared_ptr<UcxWorker> worker_;
  uint64_t tag_;
  ucp_ep_h ep_ = nullptr;
  ucs_status_t failure_ = UCS_OK;  // set by UCX's error callback (during progress, on this thread)
  bool sending_;                   // a send comm's link (only those say goodbye)
  std::array<Op, kMaxRequestsPerComm> ops_;
};

Status registerHostMemory(int pointerKind, MemoryRegion** region);

// What both directions share: one UcxLink behind the Comm calls (UCX needs no registration for tag
// messages in host memory; registering checks the kind only).
template <typename Base>
class UcxComm : public Base {
 public:
  explicit UcxComm(std::unique_ptr<UcxLink> link) : link_(std::move(link)) {}
  Status registerMemory(void* data, size_t bytes, int pointerKind, MemoryRegion** region) override {
    return (void)data, (void)bytes, registerHostMemory(pointerKind, region);
  }
  Status deregisterMemory(MemoryRegion*) override { return Status::Ok(); }
  Status test(Request* request, bool* done, size_t* sizes) override { return link_->test(request, done, sizes); }
  void addWaits(WaitList* waits) override { link_->addWaits(waits); }

 protected:
  std::unique_ptr<UcxLink> link_;
};

class UcxSendComm final : public UcxComm<SendComm> {
 public:
  using UcxComm::UcxComm;
  Status isend(const void* data, size_t bytes, int tag, MemoryRegion* region, Request** request) override;
};

class UcxRecvComm final : public UcxComm<RecvComm> {
 public:
  using UcxComm::UcxComm;
  Status irecv(int n, void* const* data, const size_t* sizes, const int* tags, MemoryRegion* const* regions,
               Request** request) override;
  Status iflush(int n, void* const* data, const size_t* sizes, MemoryRegion* const* regions,
                Request** request) override;
};

}  // namespace loom::net::ucx
