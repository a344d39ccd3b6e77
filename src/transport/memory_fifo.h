// Send/receive over a FIFO that lives in the receiver's segment (threads: same address space;
// processes: shared memory). The sender copies into a slot and publishes it by advancing `tail`;
// the receiver reads it in place (so a reduction reads straight from the slot) and frees it by
// advancing `head`. Each side rings the other's doorbell after it moves its counter.
#pragma once

#include "transport/connection.h"
#include "transport/segment.h"

namespace loom {

struct FifoView {
  FifoControl* control = nullptr;
  char* slots = nullptr;
  size_t nslots = 0;
  size_t slotBytes = 0;
};

class MemorySendConnection final : public SendConnection {
 public:
  MemorySendConnection(FifoView fifo, Doorbell* receiverBell) : fifo_(fifo), receiverBell_(receiverBell) {}
  void* trySendBuffer() override;
  Status commitSend(size_t bytes) override;
  size_t slotBytes() const override { return fifo_.slotBytes; }

 private:
  FifoView fifo_;
  Doorbell* receiverBell_;
  uint64_t tail_ = 0;
};

class MemoryRecvConnection final : public RecvConnection {
 public:
  MemoryRecvConnection(FifoView fifo, Doorbell* senderBell, int peer)
      : fifo_(fifo), senderBell_(senderBell), peer_(peer) {}
  Status tryRecv(size_t expectedBytes, const void** data) override;
  void releaseRecv() override;

 private:
  FifoView fifo_;
  Doorbell* senderBell_;
  int peer_;
  uint64_t head_ = 0;
};

}  // namespace loom
