// The host side of plan kernels' network lanes (NCCL's proxy thread). A plan kernel reaches a peer on
// another host through FIFOs in its own rank's memory, laid out as those it shares with peer GPUs
// (kernels/cuda/device_plan_layout.h's DeviceFifo), and this proxy's thread moves their messages over
// a network provider's comms:
//
// - a send FIFO (kernel -> network): the kernel fills a slot and its size word and raises `tail`; the
//   proxy posts an isend straight from the slot and raises `head` once the provider is done with it,
//   which gives the slot back to the kernel;
// - a receive FIFO (network -> kernel): the proxy keeps an irecv posted into every slot the kernel has
//   consumed (`head`); once a message arrived, and was flushed (iflush: a provider that wrote GPU
//   memory makes it visible to the GPU first), it writes the slot's size word and raises `tail`.
//
// Counters are read with acquire and written with release (the kernel's side uses system-scope
// atomics); the slots are registered with the provider once, when the proxy starts. They live in
// pinned host memory (staged: the GPU reads and writes them across PCIe) or in GPU memory the NIC
// reaches (GPUDirect RDMA: registered through dmabuf or as CUDA pointers); the counters are always in
// pinned host memory, which the proxy polls.
//
// The proxy owns its provider instance and its comms (a provider's comms are driven by one thread at a
// time): the host transports' connections are not shared. Waiting never spins forever: an idle proxy
// yields, then sleeps in poll() on what its comms name, at most kMaxIdleSleepUs (2 ms once nothing
// moved for 50 ms), and wake() (a launch) ends the sleep at once.
//
// CUDA-free: it sees memory as pointers, and the device layer hands it what it allocated.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "base/exchange.h"
#include "base/status.h"
#include "kernels/cuda/device_plan_layout.h"
#include "transport/net/provider.h"

namespace loom::net {

struct ProxiedFifos {
  uint32_t nchannels = 1;
  // A network peer's lanes are its channels 0..laneChannels-1. Every rank passes the same value, also a
  // rank without tables (the connection setup's records are sized by it).
  uint32_t laneChannels = 1;
  // By peer * nchannels + channel: the FIFOs of network peers (present()), nothing for the others.
  std::vector<cuda::DeviceFifo> sends, recvs;
  // How the slots are registered: kHostPointers (pinned host memory), kCudaPointers (GPU memory,
  // nvidia-peermem), or kDmabufPointers (GPU memory exported by `dmabufOf`).
  int slotPointerKind = kHostPointers;
  // For kDmabufPointers: the dmabuf fd covering [data, data + bytes) and data's offset in it; the
  // proxy closes the fd once registered.
  std::function<Status(void* data, size_t bytes, int* fd, uint64_t* offset)> dmabufOf;
};

class FifoProxy {
 public:
  static constexpr int64_t kMaxIdleSleepUs = 200;

  // Collective over `exchange` (every rank of the communicator calls it, with its network peers'
  // FIFOs; a rank without any passes empty tables). Connects one comm each way per (network peer,
  // channel) on `provider`'s `device` (a rank whose provider failed passes it null and the error,
  // so that every rank fails with it), registers every FIFO's slots and starts the thread.
  // `onFailure` is called once, from the proxy's thread, with the peer's rank and an error naming it
  // when a comm fails; that proxy then stops moving messages.
  static Status start(PeerExchange& exchange, std::unique_ptr<Provider> provider, const Status& providerError,
                      int device, ProxiedFifos fifos, int64_t timeoutMs,
                      std::function<void(int peer, const Status&)> onFailure, std::unique_ptr<FifoProxy>* out);
  ~FifoProxy();  // stops the thread, deregisters the slots, closes the comms
  FifoProxy(const FifoProxy&) = delete;
  FifoProxy& operator=(const FifoProxy&) = delete;

  // Work may be coming (a launch was enqueued): an idle proxy stops sleeping. From any thread.
  void wake();

 private:
  struct Lane;
  FifoProxy() = default;
  void run();
  Status progress(Lane& lane, bool* moved);
  Status progressSend(Lane& lane, bool* moved);
  Status progressRecv(Lane& lane, bool* moved);
  bool sleepIdle(int64_t us, bool deep);

  std::unique_ptr<Provider> provider_;  // declared first: the comms need it until they are gone
  std::vector<Lane> lanes_;
  std::function<void(int peer, const Status&)> onFailure_;
  std::atomic<bool> stop_{false};
  int wakeFd_ = -1;  // an eventfd: wake() writes it, the idle sleep polls it
  std::thread thread_;
};

}  // namespace loom::net
