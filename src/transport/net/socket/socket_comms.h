// The socket provider's send and receive comms: the provider interface over one SocketLink each.
// Host memory needs no registration here (the kernel copies from and into any address), so
// registering only checks the pointer kind.
#pragma once

#include <memory>
#include <vector>

#include "transport/net/provider.h"
#include "transport/net/socket/socket_link.h"

namespace loom::net::socket {

Status registerHostOnly(void* data, size_t bytes, int pointerKind, MemoryRegion** region);

// What both directions share: one SocketLink behind the Comm calls.
template <typename Base>
class SocketComm : public Base {
 public:
  SocketComm(std::shared_ptr<SocketShared> shared, Socket control, std::vector<Socket> streams, bool sending,
             uint64_t peerInstance)
      : link_(std::move(shared), std::move(control), std::move(streams), sending, peerInstance) {}
  SocketLink& link() { return link_; }
  Status registerMemory(void* data, size_t bytes, int pointerKind, MemoryRegion** region) override {
    return registerHostOnly(data, bytes, pointerKind, region);
  }
  Status deregisterMemory(MemoryRegion*) override { return Status::Ok(); }
  Status test(Request* request, bool* done, size_t* sizes) override { return link_.test(request, done, sizes); }
  void addWaits(WaitList* waits) override { link_.addWaits(waits); }

 protected:
  SocketLink link_;
};

class SocketSendComm final : public SocketComm<SendComm> {
 public:
  SocketSendComm(std::shared_ptr<SocketShared> shared, Socket control, std::vector<Socket> streams,
                 uint64_t peerInstance)
      : SocketComm(std::move(shared), std::move(control), std::move(streams), true, peerInstance) {}
  Status isend(const void* data, size_t bytes, int tag, MemoryRegion* region, Request** request) override;
};

class SocketRecvComm final : public SocketComm<RecvComm> {
 public:
  SocketRecvComm(std::shared_ptr<SocketShared> shared, Socket control, std::vector<Socket> streams,
                 uint64_t peerInstance)
      : SocketComm(std::move(shared), std::move(control), std::move(streams), false, peerInstance) {}
  Status irecv(int n, void* const* data, const size_t* sizes, const int* tags, MemoryRegion* const* regions,
               Request** request) override;
  Status iflush(int n, void* const* data, const size_t* sizes, MemoryRegion* const* regions,
                Request** request) override;
};

}  // namespace loom::net::socket
