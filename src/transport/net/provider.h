// The network interface: what every network provider (socket, ucx, ib verbs, an external NCCL net
// plugin) offers, shaped like NCCL's ncclNet_t so that the same calls map one to one onto a
// plugin and back (plugin/). Everything is non-blocking:
//
// - A connection is one way. The receiver listen()s, which fills a handle of at most kHandleBytes
//   that travels to the sender out of band (the bootstrap); the sender connect()s with it and the
//   receiver accept()s, both called again and again until their comm appears.
// - isend/irecv post a message and return a request, or none when the comm cannot take one now
//   (call again later); test() says when a request is done (and frees it). Messages on a comm match
//   in posting order; a receive may be larger than the message that fills it, never smaller.
// - Memory is registered (registerMemory) before it is sent from or received into, as the plugins
//   require; providers that need nothing return a cheap handle. iflush makes received device memory
//   visible to the GPU (providers without device memory complete it at once).
//
// A Provider instance belongs to one communicator (per-communicator state; NCCL's v11 plugins are
// initialised per communicator too), and its comms are driven by one thread at a time.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "transport/connection.h"

namespace loom::net {

inline constexpr size_t kHandleBytes = 128;     // NCCL_NET_HANDLE_MAXSIZE
inline constexpr int kMaxRequestsPerComm = 32;  // NCCL_NET_MAX_REQUESTS: outstanding requests per comm

// Pointer kinds a device can send from and receive into (NCCL_PTR_*).
enum PointerSupport : int { kHostPointers = 1, kCudaPointers = 2, kDmabufPointers = 4 };

struct DeviceProperties {
  std::string name;     // interface or NIC name
  std::string pciPath;  // the device's /sys path ("" for a virtual device)
  uint64_t guid = 0;    // devices with one guid are ports of one NIC
  int ptrSupport = kHostPointers;
  // Registering memory is cached by the provider (NCCL's regIsGlobal): registering a range that lies
  // inside an earlier registration costs next to nothing, so user buffers may be registered per call.
  bool regIsGlobal = false;
  bool forceFlush = false;  // every receive must be flushed
  // Loom's addition: false when isend/irecv take any host memory without a registration (Loom's own
  // socket and ucx providers); plugins are assumed to need one, as NCCL's contract says.
  bool hostNeedsRegistration = true;
  int speedMbps = 0;
  int port = 0;
  float latencyUs = 0;
  int maxComms = 0;
  int maxRecvs = 1;             // buffers one irecv may carry
  size_t maxMessageBytes = 0;   // largest isend/irecv size (0: no limit of its own)
};

struct Handle {
  std::array<uint8_t, kHandleBytes> bytes{};
};

// Opaque to callers; each provider defines its own (a plugin's are the plugin's void pointers).
struct Request;
struct MemoryRegion;

// What a send or receive comm has in common.
class Comm {
 public:
  virtual ~Comm() = default;
  // `pointerKind` is one PointerSupport bit. The region stays valid until deregisterMemory.
  virtual Status registerMemory(void* data, size_t bytes, int pointerKind, MemoryRegion** region) = 0;
  // GPU memory exported as a dmabuf (ncclNet's regMrDmaBuf): [data, data + bytes) is bytes
  // [offset, offset + bytes) of `fd`. Only devices with kDmabufPointers take it.
  virtual Status registerDmabuf(void* data, size_t bytes, int fd, uint64_t offset, MemoryRegion** region) {
    (void)data, (void)bytes, (void)fd, (void)offset, (void)region;
    return invalidArgument("this network provider does not register dmabuf memory");
  }
  virtual Status deregisterMemory(MemoryRegion* region) = 0;
  // *done once the request completed (it is freed then and must not be tested again). `sizes`
  // (may be null) receives the bytes sent, or, for a receive, the bytes of each of its buffers.
  virtual Status test(Request* request, bool* done, size_t* sizes) = 0;
  // Loom's addition to ncclNet: what a thread waiting on this comm's requests may sleep on. A comm
  // that can offer nothing caps the sleep (WaitList::capSleep), so waiting never stalls it.
  virtual void addWaits(WaitList* waits) = 0;
};

class SendComm : public Comm {
 public:
  // *request null: the comm cannot take another message now; call again.
  virtual Status isend(const void* data, size_t bytes, int tag, MemoryRegion* region, Request** request) = 0;
};

class RecvComm : public Comm {
 public:
  // One request for `n` buffers (n <= maxRecvs); each arriving message goes to the buffer whose tag
  // it carries. *request null: cannot post now; call again.
  virtual Status irecv(int n, void* const* data, const size_t* sizes, const int* tags, MemoryRegion* const* regions,
                       Request** request) = 0;
  // Makes received device memory visible to the GPU; *request null when there is nothing to flush.
  virtual Status iflush(int n, void* const* data, const size_t* sizes, MemoryRegion* const* regions,
                        Request** request) = 0;
};

class ListenComm {
 public:
  virtual ~ListenComm() = default;
  // *out stays null until the peer's connect() arrived; call again.
  virtual Status accept(std::unique_ptr<RecvComm>* out) = 0;
};

class Provider {
 public:
  virtual ~Provider() = default;
  virtual const std::string& name() const = 0;
  virtual int deviceCount() const = 0;
  virtual Status deviceProperties(int device, DeviceProperties* out) const = 0;
  virtual Status listen(int device, Handle* handle, std::unique_ptr<ListenComm>* out) = 0;
  // *out stays null until the connection is up; call again with the same handle object, in which
  // the provider may keep its progress (as NCCL's providers do).
  virtual Status connect(int device, Handle* handle, std::unique_ptr<SendComm>* out) = 0;
  // Loom's addition: `send` and `recv` connect this rank with the same peer, both ways, and carry no
  // message yet; a provider may let them share what it can (the socket provider: one control
  // connection, so that each direction's messages carry the other's acknowledgements). The peer pairs
  // its own two in the same call. Nothing changes for a provider that ignores it.
  virtual void pairComms(SendComm& send, RecvComm& recv) { (void)send, (void)recv; }
  // Loom's addition: moves what the provider holds for its comms without a request being tested (UCX:
  // a send it reported complete can still sit in its TCP transport's buffer until the worker is
  // progressed). A waiting rank calls it whatever it waits for, so that a peer waiting on bytes this
  // rank already sent is not left behind by an operation that uses no network comm.
  virtual void progress() {}
  // Loom's addition: whether the device spec (LOOM_SOCKET_IFNAME) names this provider's devices. The ib
  // provider's devices are RDMA ports, chosen by LOOM_IB_HCA and the topology; the spec only places
  // its side channel.
  virtual bool interfaceNamedDevices() const { return true; }
};

}  // namespace loom::net
