// The device layer's seam (docs/DESIGN.md: core -> device -> kernels): everything core asks of CUDA, and
// the only header of src/device that core includes (with operation_gate.h, which it exposes). Core
// routes each operation once, by its communicator and the memory kind of its buffers, to the host
// path, to staging through pinned host memory, or to plan kernels; only the last two come here.
//
// CUDA builds implement it with the rest of this folder; builds without CUDA link host_only.cc
// instead, whose answer to everything is "no device memory here", so a host-only build contains no
// CUDA code at all. In a CUDA build on a machine without a GPU, cudaUsable() is decided once and
// every later question about a pointer is answered without a CUDA call.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/builders.h"
#include "algorithms/plan.h"
#include "base/exchange.h"
#include "base/process_identity.h"
#include "base/status.h"
#include "base/tools_api.h"
#include "device/operation_gate.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cuda/device_plan_layout.h"
#include "loom.h"

namespace loom::device {

// ---- Memory kinds -------------------------------------------------------------------------------------

enum class MemoryKind {
  Host,     // ordinary, pinned or registered host memory, or anything CUDA does not know
  Managed,  // cudaMallocManaged: host-accessible, but ordered by CUDA streams
  Device,   // cudaMalloc / cuMem: not host-accessible
};

struct MemoryInfo {
  MemoryKind kind = MemoryKind::Host;
  int device = -1;  // the owning GPU of device and managed memory
};

// Whether this process can serve device memory: a CUDA build that found a driver and a GPU. Decided
// once; LOOM_CUDA=0 answers false without touching CUDA.
LOOM_TOOLS_API bool cudaUsable();
// Devices visible to this process (0 when CUDA is unusable).
LOOM_TOOLS_API int deviceCount();
// Why CUDA is unusable ("" when it is usable), for messages.
LOOM_TOOLS_API const std::string& unusableReason();
// GB/s (1e9 bytes per second of bytes copied) of a large device-to-device copy on `device`, measured
// once per process and GPU (copy_rate.cc); 0 where it could not be measured or CUDA is unusable.
LOOM_TOOLS_API double gpuCopyRateGbs(int device);
// Device memory a caller asks for (loomMemAlloc, the NCCL drop-in's ncclMemAlloc): on the current
// device; an error naming the reason where CUDA is unusable.
Status allocateDeviceMemory(size_t bytes, void** out);
Status freeDeviceMemory(void* p);

// Where one operation's buffers are (the ranges it uses on this rank; an unused one counts as Host).
struct Placement {
  MemoryInfo send, recv;
  // The GPU when the operation uses a buffer and every buffer it uses is device memory on that one
  // GPU (what a plan kernel can run), else -1.
  int kernelGpu = -1;
  // Some buffer is CUDA memory: the operation is ordered on its stream (staged or a plan kernel).
  bool touchesCuda() const { return send.kind != MemoryKind::Host || recv.kind != MemoryKind::Host; }
};
Placement placementOf(const void* send, size_t sendBytes, const void* recv, size_t recvBytes);

// loomCommInitAll's device list: Ok when CUDA is usable and every entry names a visible device.
Status checkDeviceList(int ndev, const int* devlist);

// The CUDA device this thread works on, once it has begun to (its primary context is active): what a
// rank that named no device runs on, for the topology. -1 when CUDA is unusable or untouched.
int activeDevice();
// A device's PCI bus id ("0000:0c:00.0"), "" when CUDA cannot say.
LOOM_TOOLS_API std::string busIdOf(int device);

// A PreMulSum scalar made with loomScalarDevice may live in device memory: then its element is copied
// into `storage` (8 bytes) in `stream`'s order and waited for, and *scalar points there, so that the
// value is the one the work enqueued before the call leaves (NCCL's kernels read it when they run; the
// wait is the price of reading it on the host). Host scalars are left as they are.
Status readScalarInStreamOrder(const void** scalar, loomDataType_t dtype, void* storage, loomStream_t stream);

// Whether `stream` is being captured into a CUDA graph, and into which capture. The legacy stream and
// streams CUDA does not know are never capturing; an invalidated capture is loomInvalidUsage.
struct StreamCapture {
  bool active = false;
  unsigned long long id = 0;
};
Status captureOf(loomStream_t stream, StreamCapture* out);

// ---- GPU memory for the network (GPUDirect RDMA) -------------------------------------------------------

// Whether the CUDA driver exports `device`'s memory as dmabuf fds (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED:
// a driver of 11.7 or newer, with NVIDIA's open kernel modules); *why says why not.
bool dmabufExportable(int device, std::string* why);

// Device memory as a dmabuf fd, for ibv_reg_dmabuf_mr (cuMemGetHandleForAddressRange): the fd covers
// the whole allocation holding [p, p + bytes) (driver ranges must be page aligned; an allocation is),
// and `offset` is p's place in it. The caller closes the fd once the NIC registered it.
struct DmabufRange {
  int fd = -1;
  uint64_t offset = 0;      // of p, into the fd
  const void* base = nullptr;  // the allocation the fd covers
  size_t bytes = 0;         // its size
};
Status exportDmabuf(const void* p, size_t bytes, DmabufRange* out);

// ---- One communicator's device state ------------------------------------------------------------------


// ---- Network lanes: plan kernels with peers on other hosts -------------------------------------------

// A plan kernel reaches a peer on another host through FIFOs in its own rank's memory that a host proxy
// moves over the network (core's transport: transport/net/fifo_proxy.h). The device layer lays them
// out and allocates them; core connects and runs the proxy.
struct NetLaneTables {
  uint32_t nchannels = 1;
  uint32_t laneChannels = 1;  // channels 0..laneChannels-1 have lanes: the same on every rank
  std::vector<cuda::DeviceFifo> sends, recvs;  // by peer * nchannels + channel; present() for network peers
};

class NetLaneProxy {
 public:
  virtual ~NetLaneProxy() = default;  // stops moving messages
  virtual void wake() = 0;            // a launch was enqueued: an idle proxy looks again at once
};

struct NetLanes {
  // Where the FIFO slots live: the GPUDirect RDMA choice for the rank's GPU and NIC
  // (transport/net/gdr_choice.h). Counters are always in pinned host memory, which the proxy polls.
  enum class Slots { HostPinned, GpuDmabuf, GpuPeermem };
  Slots slots = Slots::HostPinned;
  std::string why;  // the choice's reason, for LOOM_DEBUG=INFO
  // Unset: the communicator has no peer on another host. Collective over the communicator (every rank
  // calls it once the FIFOs exist; a rank whose FIFOs could not be made passes why in `localError`,
  // and every rank then fails with it): connects the network lanes and starts moving them.
  // `onFailure` is called (from the proxy's thread) with the peer's rank and an error naming it when a
  // lane breaks.
  std::function<Status(const NetLaneTables& tables, const Status& localError,
                       std::function<void(int peer, const Status&)> onFailure, std::unique_ptr<NetLaneProxy>* out)>
      start;
};

// What the layer needs of the communicator it serves, given once at init.
struct CommFacts {
  int rank = 0;
  int nranks = 1;
  std::string describe;                     // "comm 'name' rank r/n", for messages
  PeerExchange* exchange = nullptr;         // the bootstrap: collective exchanges at setup
  std::vector<ProcessIdentity> processes;   // by rank
  int64_t timeoutMs = 0;                    // a plan kernel's wait without progress this long fails
  // Fails the communicator (its peers are told, later calls refused) with a failure the layer found:
  // a launch that could not be completed, a lane that failed. Thread-safe.
  std::function<void(const Status&)> fail;
  NetLanes netLanes;  // peers on other hosts (set by core when the communicator has network peers)
};

// Whether plan kernels serve the communicator's device buffers (decided at its first operation on them).
enum class PlanKernelSetup { NotYet, Ready, Unavailable };

// What a failure's message says about an operation, kept with its launch until the launch ended (and
// for a captured one, the communicator's lifetime): core's description of the call in bytes of its
// own, formatted by core's function only when a message needs it, so that a launch allocates nothing
// for it (core/run/group.cc fills it).
struct OperationLabel {
  static constexpr size_t kBytes = 80;
  alignas(8) unsigned char bytes[kBytes] = {};
  std::string (*format)(const OperationLabel&) = nullptr;
  std::string text() const { return format ? format(*this) : "operation"; }
};

// One rank's plan bound for a plan kernel: core planned it (hostTemporaries = false); the layer
// provides the scratch buffer and, when stageFrom is set, the plan's input (a copy of stageFrom,
// scaled by stageOp's scalar when stageScales: PreMulSum), both on the operation's stream.
struct KernelPlan {
  std::shared_ptr<const Plan> plan;
  std::vector<char*> buffers;  // by plan buffer index
  loomDataType_t dtype = loomUint8;
  size_t elemSize = 1;
  ReduceOp op;
  const char* stageFrom = nullptr;
  size_t stageBytes = 0;
  size_t sendBytes = 0;  // the operation's input and output (the plan cache's overlap key; what a
  size_t recvBytes = 0;  // one-rank collective copies)
  bool stageScales = false;
  ReduceOp stageOp;
  OperationLabel label;  // the operation, for a failure's message
  uint64_t seq = 0;  // the operation's number in the communicator's flight record
};

// How far a communicator's plan kernels got, for its flight record (core/observe/flight_record.h):
// read from any thread, changing nothing.
struct DeviceProgress {
  // The number (KernelPlan::seq) of the first operation whose launch has not ended, 0 when every launch
  // ended. Launches captured into a CUDA graph are not counted: their replays are the graph's.
  uint64_t firstUnfinished = 0;
  // The peer a lane of that launch has long been waiting on (DeviceLaneStatus::waitingOn), -1: none.
  int waitingOn = -1;
};

// What the plan kernels' setup found that the device tuner prices plans with (core's planner): the
// same on every rank of the communicator.
struct DeviceFabric {
  uint64_t slotBytes = 0;  // a FIFO slot: no message may be larger
  int fifoSlots = 1;       // slots per FIFO: messages in flight per peer and channel
  int maxChannels = 1;     // the most channels one operation may use (FIFO channels within the lane budget)
  double gpuCopyGbs = 0;   // the copy rate of the slowest GPU that ranks share (0: none shared, or unknown)
  int ranksPerGpu = 1;     // the most ranks of the communicator on one GPU (same host, same bus id)
  bool peerMemory = false;  // peer-memory plans can run: every rank a thread of this process on this GPU
  // Peer-memory plans can run on buffers in windows (loomCommWindowRegister): every rank on this GPU,
  // some in other processes (device/peer_windows.h).
  bool peerMemoryInWindows = false;
};

class CommDevice {
 public:
  // Raises the abort word if the communicator failed, then waits for its launches and stream work.
  virtual ~CommDevice() = default;

  // ---- Plan kernels (plan_kernels.h says how they run)
  virtual PlanKernelSetup planKernelSetup() const = 0;
  // Why plan kernels are unavailable ("" otherwise), and whether some rank required them
  // (LOOM_DEVICE_PLANS=require): then device operations fail with that reason instead of being staged.
  virtual const std::string& planKernelRefusal() const = 0;
  virtual bool planKernelsRequired() const = 0;
  // The GPU they run on (when Ready).
  virtual int planKernelGpu() const = 0;
  // What the setup found (when Ready), for the device tuner.
  virtual DeviceFabric fabric() const = 0;
  // Caps the tuner's channel count for a plan kernel where this shape's lanes would exceed what the
  // GPU holds resident (core's planner calls it before the plan is built); every rank decides alike.
  virtual Status adjustChannels(Algorithm algo, PlanRequest* req) = 0;
  // Launches `plans` (this rank's share of one group, in order) on `streams[0]`, after everything on
  // every stream of `streams` and before anything later on them; refuses (loomInvalidUsage, nothing
  // enqueued) what cannot run as a plan kernel: buffers not aligned to their element size, the legacy
  // stream while a rank of this process shares the GPU, streams of different CUDA graph captures.
  virtual Status launch(std::vector<KernelPlan>& plans, std::span<const loomStream_t> streams) = 0;

  // Stops every waiting lane at its next wait (an abort, or a failure of the communicator).
  virtual void raiseAbort() = 0;
  // Looks at finished launches: one whose lanes failed fails the communicator (loomCommGetAsyncError).
  virtual void poll() = 0;
  // LOOM_DEVICE_PROFILE: what the finished launches' lanes timed (loomCommDeviceProfile), then zeroed
  // with `reset`; loomInvalidUsage when profiling is off or plan kernels are not Ready.
  virtual Status profile(bool reset, loomDeviceProfile_t* out) = 0;
  // Where the launches in flight are (DeviceProgress); from any thread.
  virtual DeviceProgress progress() = 0;

  // ---- Windows (device/peer_windows.h): collective registrations of device buffers
  // Registers [p, p + bytes) on every rank (*slot: the same on every rank); plan kernels, when set
  // up, let ranks in other processes on this GPU address it. Every rank fails alike when one cannot.
  virtual Status registerWindow(void* p, size_t bytes, uint32_t* slot) = 0;
  // Ends the window in `slot` on every rank, after this rank's launches finished.
  virtual Status deregisterWindow(uint32_t slot) = 0;
  // This rank's window in `slot` ({nullptr, 0}: none).
  virtual std::pair<void*, size_t> window(uint32_t slot) const = 0;
  // Whether an operation's input and output lie in windows that peer-memory plans can use
  // (DeviceFabric::peerMemoryInWindows): then the device tuner may choose them for it.
  virtual bool inWindows(const void* send, size_t sendBytes, const void* recv, size_t recvBytes) const = 0;
};

// The communicator's device state (null in builds without CUDA). Makes no CUDA call.
std::unique_ptr<CommDevice> makeCommDevice(CommFacts facts);

// Sets up plan kernels for every pair (communicator, GPU of its first device operation) at once: each
// setup waits for all ranks of its communicator, and one thread may drive several of them (a group
// over loomCommInitAll's communicators). An error when an exchange failed, or when LOOM_DEVICE_PLANS=
// require and plan kernels cannot run; otherwise each communicator is Ready or Unavailable after it.
Status setUpPlanKernels(std::span<const std::pair<CommDevice*, int>> pending);

// ---- Staging through pinned host memory (staging.h says how) ----------------------------------------

// One operation whose buffers touch CUDA memory and that plan kernels do not run.
struct StagedCall {
  const void* send = nullptr;  // in: the caller's buffers; in the host part: where the host plans run
  void* recv = nullptr;
  size_t sendBytes = 0;
  size_t recvBytes = 0;
  Placement placement;
  loomStream_t stream = nullptr;
  CommDevice* comm = nullptr;
  bool peerInThisProcess = false;  // some other rank of its communicator is a thread of this process
  // A send or receive: a communicator's point-to-point operations of one group run as one operation,
  // which may start only once all their inputs are in place.
  bool pointToPoint = false;
  // Set when the call is stream-ordered: the host part must not start before the gate is ready (the
  // communicator's progress thread runs it), and finishes it when the operation ended.
  std::shared_ptr<OperationGate> gate;
};

// Runs the staged part of a group: rewrites each call's device ranges to pinned copies, runs
// `hostPart` (which runs them with the group's host operations, in call order), and copies results
// back. `mustComplete`: the copy back follows at once, so the host part must wait for its operations
// also on communicators that queue them on a progress thread. `withHostOperations`: the group also
// has operations on host memory; the staged ones then run synchronously, since a host operation
// queued behind a stream-ordered one would wait for a gate that opens only after the call returns.
using HostPart = std::function<Status(std::span<const StagedCall> calls, bool mustComplete)>;
Status runStaged(std::span<StagedCall> calls, bool withHostOperations, const HostPart& hostPart);

}  // namespace loom::device
