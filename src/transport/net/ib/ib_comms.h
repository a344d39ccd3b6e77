// The ib provider's comms and NCCL's receiver-driven protocol:
//
// - irecv posts a receive for the message's immediate on QP (message number % QPs) and writes a
//   clear-to-send entry (the buffer's address, size and rkey, the tag, the message number + 1) into
//   slot (number % 32) of the sender's FIFO with an RDMA write. Unlike NCCL's plain write, it carries
//   an immediate, so that a sender waiting for it sleeps on its completion channel instead of polling
//   the FIFO; the sender keeps receives posted on QP 0 for these.
// - isend takes the message at once (up to kMaxRequestsPerComm outstanding) and posts it when its
//   clear-to-send arrived: one RDMA_WRITE_WITH_IMM of the data into the receiver's buffer, the
//   immediate carrying the size. A receive too small for the message gets no data and the message's
//   size as the immediate: both sides fail, naming both sizes.
// - Messages match receives in posting order; with one buffer per receive (maxRecvs 1) tags are
//   carried, not matched.
// - A region that does not cover the buffer given with it is not trusted: the buffer is registered
//   through the cache for that message, so a wrong region costs time, never a protection error.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "transport/net/ib/ib_endpoint.h"
#include "transport/net/ib/memory_registry.h"
#include "transport/net/provider.h"

namespace loom::net::ib {

struct alignas(32) ClearToSend {
  uint64_t address = 0;
  uint64_t capacity = 0;
  uint32_t rkey = 0;
  int32_t tag = 0;
  uint32_t number = 0;  // the receive's number + 1 (0: never written)
  uint32_t reserved = 0;
};
static_assert(sizeof(ClearToSend) == 32);

inline constexpr int kFifoSlots = kMaxRequestsPerComm;

// What a work request is, in its wr_id's upper half (the lower half is the FIFO slot).
enum class WorkKind : uint32_t { SendData = 1, ClearToSendRecv = 2, ReceiveData = 3, ClearToSendWrite = 4, Flush = 5 };
inline uint64_t workId(WorkKind kind, uint32_t slot) { return (uint64_t{static_cast<uint32_t>(kind)} << 32) | slot; }
inline WorkKind workKind(uint64_t id) { return static_cast<WorkKind>(id >> 32); }
inline uint32_t workSlot(uint64_t id) { return static_cast<uint32_t>(id); }

// A buffer the comm registered itself (the FIFO, the clear-to-send entries), deregistered with it.
class OwnedRegion {
 public:
  OwnedRegion() = default;
  ~OwnedRegion();
  OwnedRegion(const OwnedRegion&) = delete;
  OwnedRegion& operator=(const OwnedRegion&) = delete;
  Status registerOn(IbDevice& device, void* data, size_t bytes, int access);
  ibv_mr* mr() const { return mr_; }

 private:
  const VerbsApi* api_ = nullptr;
  ibv_mr* mr_ = nullptr;
};

// What both directions share: the endpoint, registration through the device's cache, waiting.
template <typename Base>
class IbComm : public Base {
 public:
  Status registerMemory(void* data, size_t bytes, int pointerKind, MemoryRegion** region) override;
  Status registerDmabuf(void* data, size_t bytes, int fd, uint64_t offset, MemoryRegion** region) override;
  Status deregisterMemory(MemoryRegion* region) override;
  void addWaits(WaitList* waits) override;

 protected:
  explicit IbComm(std::unique_ptr<IbEndpoint> endpoint)
      : device_(endpoint->devicePointer()), endpoint_(std::move(endpoint)) {}
  // Moves everything on that can move without waiting (completions, posts); a broken connection's error.
  virtual Status progress() = 0;
  // Asks for events at the next completions (the endpoint's, and whatever else a comm waits on), and
  // adds what to sleep on.
  virtual Status arm() { return endpoint_->arm(); }
  virtual void addMoreWaits(WaitList* waits) { (void)waits; }
  // A request the caller may complete now (done or failed), or a broken connection.
  virtual bool somethingToReport() const = 0;
  // The registration for (data, bytes): `given` when it covers them, else one acquired for the message.
  Status registrationFor(MemoryRegion* given, const void* data, size_t bytes, Registration** use, Registration** own);

  // The first error that breaks the connection stays its error (later ones, such as the flushes it
  // causes, are its consequences), and the side channel is shut so that the peer fails at once too.
  const Status& fail(const Status& error) {
    if (failure_.ok() && !error.ok()) {
      failure_ = error;
      endpoint_->closeSideChannel();
    }
    return failure_;
  }

  std::shared_ptr<IbDevice> device_;  // outlives everything below and the derived comm's regions
  std::unique_ptr<IbEndpoint> endpoint_;
  Status failure_;
};

class IbSendComm final : public IbComm<SendComm> {
 public:
  // `endpoint` has its QPs in INIT; the FIFO is registered here (its address and rkey go to the peer).
  static Status create(std::unique_ptr<IbEndpoint> endpoint, std::unique_ptr<IbSendComm>* out);
  ~IbSendComm() override;
  uint64_t fifoAddress() const { return reinterpret_cast<uintptr_t>(fifo_.data()); }
  uint32_t fifoRkey() const { return fifoRegion_.mr()->rkey; }
  IbEndpoint& endpoint() { return *endpoint_; }
  // After the QPs are connected: the receives that catch clear-to-send immediates.
  Status start();

  Status isend(const void* data, size_t bytes, int tag, MemoryRegion* region, Request** request) override;
  Status test(Request* request, bool* done, size_t* sizes) override;

 private:
  enum class State { Free, WaitsForClearance, Posted, Done, Failed };
  struct Op {
    State state = State::Free;
    const void* data = nullptr;
    size_t bytes = 0;
    uint32_t lkey = 0;
    Registration* own = nullptr;
    size_t receiveCapacity = 0;  // the receive was too small: its size (the message went as a size only)
    bool tooLarge = false;
    Status error;
  };
  explicit IbSendComm(std::unique_ptr<IbEndpoint> endpoint) : IbComm(std::move(endpoint)) {}
  Status progress() override;
  bool somethingToReport() const override;
  Status onCompletion(const ibv_wc& wc);
  Status postCleared();

  std::vector<ClearToSend> fifo_ = std::vector<ClearToSend>(kFifoSlots);  // written by the receiver
  OwnedRegion fifoRegion_;
  std::array<uint32_t, kFifoSlots> cleared_{};  // per slot: the number + 1 of the last clearance that arrived
  std::array<Op, kFifoSlots> ops_{};
  uint32_t next_ = 0;    // the next message's number
  uint32_t posted_ = 0;  // messages posted to the wire so far
};

class IbRecvComm final : public IbComm<RecvComm> {
 public:
  static Status create(std::unique_ptr<IbEndpoint> endpoint, std::unique_ptr<IbRecvComm>* out);
  ~IbRecvComm() override;
  IbEndpoint& endpoint() { return *endpoint_; }
  void setPeerFifo(uint64_t address, uint32_t rkey) { peerFifo_ = address, peerFifoRkey_ = rkey; }

  Status irecv(int n, void* const* data, const size_t* sizes, const int* tags, MemoryRegion* const* regions,
               Request** request) override;
  // After a receive into GPU memory: an RDMA read of one byte of it, through a QP connected to itself,
  // into host memory (NCCL's flush). The NIC completes the read only after the data it wrote before is
  // visible, so the GPU then sees the whole message. Nothing to do for host memory or with
  // LOOM_GDR_FLUSH_DISABLE=1. One flush at a time per comm.
  Status iflush(int n, void* const* data, const size_t* sizes, MemoryRegion* const* regions,
                Request** request) override;
  Status test(Request* request, bool* done, size_t* sizes) override;
  bool flushQpMade() const { return flushEndpoint_ != nullptr; }  // tests

 private:
  enum class State { Posted, Done, Failed };
  struct Op {
    bool held = false;              // handed to the caller, not yet reported done
    bool clearanceInFlight = false; // its clear-to-send entry is still being written
    State state = State::Posted;
    size_t capacity = 0, bytes = 0;
    Registration* own = nullptr;
    Status error;
  };
  // The flush in flight (the request iflush hands out).
  struct Flush {
    bool held = false;
    State state = State::Posted;
    Status error;
  };
  explicit IbRecvComm(std::unique_ptr<IbEndpoint> endpoint) : IbComm(std::move(endpoint)) {}
  Status progress() override;
  bool somethingToReport() const override;
  Status arm() override;
  void addMoreWaits(WaitList* waits) override;
  Status onCompletion(const ibv_wc& wc);
  Status testFlush(bool* done);

  std::vector<ClearToSend> outgoing_ = std::vector<ClearToSend>(kFifoSlots);  // what the writes send
  OwnedRegion outgoingRegion_;
  uint64_t peerFifo_ = 0;
  uint32_t peerFifoRkey_ = 0;
  std::array<Op, kFifoSlots> ops_{};
  uint32_t next_ = 0;
  std::unique_ptr<IbEndpoint> flushEndpoint_;  // made at the first flush
  char flushByte_ = 0;                         // where flush reads land
  OwnedRegion flushRegion_;
  Flush flush_;
};

}  // namespace loom::net::ib
