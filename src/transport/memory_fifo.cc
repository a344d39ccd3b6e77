#include "transport/memory_fifo.h"

namespace loom {

void* MemorySendConnection::trySendBuffer() {
  uint64_t head = fifo_.control->head.load(std::memory_order_acquire);
  if (tail_ - head >= fifo_.nslots) return nullptr;
  return fifo_.slots + (tail_ % fifo_.nslots) * fifo_.slotBytes;
}

Status MemorySendConnection::commitSend(size_t bytes) {
  if (bytes > fifo_.slotBytes) return internalError("message of {} bytes exceeds the {}-byte slot", bytes, fifo_.slotBytes);
  fifo_.control->sizes[tail_ % fifo_.nslots] = bytes;
  fifo_.control->tail.store(++tail_, std::memory_order_release);
  ringDoorbell(receiverBell_);
  return Status::Ok();
}

Status MemoryRecvConnection::tryRecv(size_t expectedBytes, const void** data) {
  *data = nullptr;
  if (fifo_.control->tail.load(std::memory_order_acquire) == head_) return Status::Ok();
  size_t bytes = fifo_.control->sizes[head_ % fifo_.nslots];
  if (bytes != expectedBytes)
    return errorStatus(loomInvalidUsage,
                       "rank {} sent a message of {} bytes where {} were expected: the ranks called "
                       "different operations or counts",
                       peer_, bytes, expectedBytes);
  *data = fifo_.slots + (head_ % fifo_.nslots) * fifo_.slotBytes;
  return Status::Ok();
}

void MemoryRecvConnection::releaseRecv() {
  fifo_.control->head.store(++head_, std::memory_order_release);
  ringDoorbell(senderBell_);
}

}  // namespace loom
