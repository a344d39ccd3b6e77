#include "transport/net/socket/socket_comms.h"

namespace loom::net::socket {

namespace {
// Any non-null value would do: nothing is registered, and the comms never look at it.
const char kHostRegion = 0;
}  // namespace

Status registerHostOnly(void* data, size_t bytes, int pointerKind, MemoryRegion** region) {
  (void)data, (void)bytes;
  if (pointerKind != kHostPointers)
    return invalidArgument("the socket provider sends host memory only (pointer kind {})", pointerKind);
  *region = reinterpret_cast<MemoryRegion*>(const_cast<char*>(&kHostRegion));
  return Status::Ok();
}

Status SocketSendComm::isend(const void* data, size_t bytes, int tag, MemoryRegion* region, Request** request) {
  (void)tag, (void)region;  // one receive per message: tags choose nothing here (maxRecvs 1)
  return link_.post(static_cast<char*>(const_cast<void*>(data)), bytes, request);
}

Status SocketRecvComm::irecv(int n, void* const* data, const size_t* sizes, const int* tags,
                             MemoryRegion* const* regions, Request** request) {
  (void)tags, (void)regions;
  *request = nullptr;
  if (n != 1) return invalidArgument("the socket provider takes one buffer per receive, not {}", n);
  return link_.post(static_cast<char*>(data[0]), sizes[0], request);
}

Status SocketRecvComm::iflush(int n, void* const* data, const size_t* sizes, MemoryRegion* const* regions,
                              Request** request) {
  (void)n, (void)data, (void)sizes, (void)regions;
  *request = nullptr;  // host memory only: nothing to make visible
  return Status::Ok();
}

}  // namespace loom::net::socket
