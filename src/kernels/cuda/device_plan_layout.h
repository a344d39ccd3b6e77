// The encoded layout of one rank's plan for one operation (device_plan.h encodes it): plain structs
// that a kernel reads from device memory (plan_kernel.cu) and a host thread from host memory (the
// tests' emulation); the same bytes serve both. Everything here compiles under nvcc and any C++
// compiler, with no CUDA header and nothing of the library's host-only headers (fmt).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/reduce.h"
#include "loom.h"

namespace loom::cuda {

// A FIFO counter on its own 128-byte line (the sector pair a GPU moves at once), so that polling one
// counter never drags another side's writes along with it.
struct alignas(128) DeviceFifoCounter {
  uint64_t value = 0;
};
// A FIFO region's parts (its counters, its arrays, its slots) each start on a line of their own.
constexpr size_t kFifoLine = alignof(DeviceFifoCounter);
constexpr size_t alignToFifoLine(size_t n) { return (n + kFifoLine - 1) / kFifoLine * kFifoLine; }

// Direct mode (single copy): a receiver whose step stores the incoming elements unchanged (Recv, or
// RecvCopySend with a destination) may, before it waits, post where they go; a sender that finds the
// post for its message (same sequence number, same byte count) writes there instead of into a slot and
// marks the message's size word with kDirectMessage, and the receiver then has nothing to copy. A
// sender that comes first uses the slot as usual, so neither side ever waits for the other's post.
// Only where both ends share an address space (ranks as threads of one process) and the destination
// is writable from the sender's GPU.
struct DeviceDirectPost {
  uint64_t seq = 0;      // the message it is for, plus one (0: none yet); stored last, with release
  uint64_t address = 0;  // where the message's bytes go, in the address space both ends share
  uint64_t bytes = 0;    // how many the receiver expects: a sender of another size uses the slot
  uint64_t reserved = 0;
};
inline constexpr uint64_t kDirectMessage = uint64_t{1} << 63;  // in a size word: the bytes went to the post
// In a post's seq: a sender took the post (compare-and-swap from seq) and writes there. A receiver
// whose lane stops before its message arrived withdraws its post the same way (seq to 0), so that no
// sender writes into memory whose operation has ended; when the sender was first, the receiver waits
// for its message (the sender has nothing left to wait for once it took the post).
inline constexpr uint64_t kPostTaken = uint64_t{1} << 63;

// Low-latency messages (NCCL's LL protocol): a message of at most kLowLatencyBytes may travel as 8-byte
// words, each 4 bytes of data and a 4-byte flag (the message's sequence number + 1) stored at once, so
// that the receiver polls the words themselves: the sender publishes no counter behind a release fence
// and the receiver waits for none before the data. Twice the bytes cross, so only small messages gain
// (the device layer's threshold, device/channels.h). They have slots of their own, zeroed at setup and
// never holding anything else, so that no data can pass for a flag.
inline constexpr uint64_t kLowLatencyBytes = 4096;  // the most data one low-latency message carries
inline constexpr uint64_t kLowLatencySlotBytes = 2 * kLowLatencyBytes;

// Which threads a FIFO's counters, size words and posts must be coherent for: the narrowest scope that
// holds both ends. System: the other end is another GPU, the host (a proxy, a NIC's memory) or another
// process. Gpu: both ends are kernels of one process on one GPU, whose fences then order the GPU's own
// memory only (MEMBAR.GPU instead of MEMBAR.SYS: no wait for the memory system to drain to the fabric).
enum class FifoScope : uint32_t { System = 0, Gpu = 1 };

// One direction of one (peer, channel) connection, as both of its ends see it. Every pointer must be
// valid where the interpreter runs (device: device or mapped host memory, peer memory over CUDA IPC).
struct DeviceFifo {
  char* slots = nullptr;     // nslots x slotBytes, in the receiver's memory
  uint64_t* tail = nullptr;  // messages posted: the sender writes it, the receiver polls it (receiver's memory)
  // Messages consumed: the receiver writes it, the sender polls it. Best in the sender's memory, so that
  // both sides poll locally and write across the link.
  uint64_t* head = nullptr;
  uint64_t* sizes = nullptr;  // nslots words: the bytes of the message in each slot (receiver's memory)
  DeviceDirectPost* posts = nullptr;  // nslots entries (receiver's memory), or null: no direct mode
  // nslots x kLowLatencySlotBytes (receiver's memory) for low-latency messages, or null: none (a FIFO
  // whose slots a proxy or a NIC writes, which may not land 8 bytes at once).
  char* lowLatencySlots = nullptr;
  uint64_t slotBytes = 0;
  uint32_t nslots = 0;
  FifoScope scope = FifoScope::System;
  bool present() const { return slots && tail && head && sizes && nslots > 0 && slotBytes > 0; }
};

// How a lane ended, written by the lane itself (its first worker) when it stops.
enum class DeviceLaneOutcome : uint32_t {
  NotReported = 0,       // the lane never reported (its launch did not run, or has not finished)
  Done = 1,              // every step ran
  Aborted = 2,           // the abort word became non-zero while the lane waited
  TimedOut = 3,          // a wait made no progress for the plan's timeout
  SizeMismatch = 4,      // a message's size differs from the step's (the ranks run different operations)
  WrongElementSize = 5,  // the kernel's element type is not the encoded plan's dtype
  OutsideWindows = 6,    // a peer published a buffer that lies in none of its windows this rank mapped
};

// Where a lane's time went, when its plan was encoded with `profile` (LOOM_DEVICE_PROFILE): the lane's
// first worker reads the clock (%globaltimer on a GPU) around the parts of each step, so every figure
// is that worker's view. Zero when not profiled. (No member initializers: the interpreter keeps one in
// a lane's shared memory, which a type with a constructor may not be.)
struct DeviceLaneProfile {
  uint64_t waitNs;     // claiming the step: waiting for a free slot and for the message (low-latency words too)
  uint64_t dataNs;     // the step's copies and reductions, from the barrier that hands them out to the one ending them
  uint64_t publishNs;  // publishing: the release of the FIFOs' counters
  uint64_t laneNs;     // the lane from its first step's claim to its last step's publish
  uint64_t bytes;      // the steps' elements, in bytes
};

struct DeviceLaneStatus {
  uint32_t outcome = 0;  // DeviceLaneOutcome
  uint32_t step = 0;     // the step the lane stopped at (its step count when Done)
  int32_t peer = -1;     // the peer it waited on, or -1
  // While the lane runs: 1 + the peer a wait of the lane has lasted kNoteWaitRounds on (0: none), so
  // that the host can say whom a device collective in flight waits on (the flight record, loom-doctor).
  uint32_t waitingOn = 0;
  uint64_t detail = 0;  // SizeMismatch: the bytes that arrived
  DeviceLaneProfile profile = {};
};

// ---- The plan itself (read in place by plan_interpreter.cuh) ------------------------------------------

inline constexpr uint32_t kNoDeviceBuffer = 0xffffffffu;  // == algorithms/plan.h's kNoBuffer

// Meet and ReduceRanks: peer-memory plans (algorithms/plan.h), below.
enum class DeviceStepKind : uint8_t { Send, Recv, RecvReduce, RecvReduceSend, RecvCopySend, Copy, Reduce, Meet, ReduceRanks };

// Peer-memory plans (ranks that address each other's buffers: rank threads of one process on one GPU)
// move no messages: a step reads a peer's buffer or writes into it, at addresses the peer made known at
// its lane's first Meet. Each rank has a board per channel in its own memory (its FIFO block), which
// its peers read: how many Meets its lane of that channel arrived at, and its call's buffers. A Meet
// releases this rank's count and waits until every peer's has reached it; the first one of a plan also
// reads every peer's buffers (written before that count, so seen once it is). A board is overwritten at
// a rank's next plan's first Meet, which no rank reaches before every rank passed this plan's last.
struct alignas(128) DevicePeerBoard {
  uint64_t meets = 0;                       // only grows; its release publishes `buffers`
  uint64_t buffers[4] = {};                 // the call's send, recv, scratch (kInlineBuffers), as addresses
};
inline constexpr int32_t kMaxPeerRanks = 8;      // == algorithms/plan.h's kMaxPeerMemoryRanks

// Peer-memory plans between rank processes (device/peer_windows.h): a rank publishes its buffers as its
// own process addresses them, which a peer in another process cannot use as they are. The buffers then
// lie in windows the communicator registered collectively (loomCommWindowRegister), each mapped by
// every rank through CUDA IPC; a reader finds the peer's window holding the address and reads it at
// its own mapping of that window. The table lives in device memory; registration fills an entry
// before it returns, and no launch may use a window before that (or after its deregistration).
struct DeviceWindowView {
  uint64_t owner = 0;  // the window's start as its rank addresses it (0: not registered on that rank)
  uint64_t bytes = 0;
  uint64_t local = 0;  // the same bytes as this rank addresses them
};
inline constexpr uint32_t kMaxWindows = 64;
// The buffers a peer-memory plan names on another rank: its send and recv (algorithms/peer_memory.cc;
// scratch is each rank's own). Only those are translated; a peer's others are never read.
inline constexpr uint32_t kPeerSharedBuffers = 2;
struct DeviceWindowTable {
  uint32_t slotsUsed = 0;  // slots at and past it are free (a reader searches below it only)
  uint32_t reserved = 0;
  DeviceWindowView views[kMaxWindows][kMaxPeerRanks];  // [window slot][rank]; a free slot's owners are 0
};
inline constexpr int8_t kStepOwnRank = -1;       // a DeviceStep's srcRank/dstRank: == plan.h's kOwnRank
inline constexpr int8_t kStepEveryRank = -3;     // == kEveryRank

struct DeviceLane {
  uint32_t channel = 0;
  uint32_t firstStep = 0;
  uint32_t stepCount = 0;
  uint32_t reserved = 0;
};

struct DeviceStep {
  DeviceStepKind kind = DeviceStepKind::Copy;
  uint8_t finalize = 0;
  uint8_t hasDst = 0;  // the step writes dst (RecvReduceSend and RecvCopySend only when their dst is valid)
  uint8_t postsDst = 0;  // the receiver posts dst for the sender to write into directly (DeviceDirectPost)
  uint8_t sendLowLatency = 0;  // the outgoing message travels as low-latency words (kLowLatencyBytes)
  uint8_t recvLowLatency = 0;  // the incoming one does (the sender's step decided alike: same FIFO, bytes)
  int32_t sendPeer = -1;
  int32_t recvPeer = -1;
  int32_t sendFifo = -1;  // index into the send FIFO table (peer * nchannels + channel), or -1
  int32_t recvFifo = -1;  // index into the receive FIFO table, or -1
  uint32_t srcBuffer = kNoDeviceBuffer;
  uint32_t dstBuffer = kNoDeviceBuffer;
  int8_t srcRank = kStepOwnRank;  // whose buffer src is (peer-memory plans): own, a rank, or every rank's
  int8_t dstRank = kStepOwnRank;  // whose dst is: own, a rank, or every rank's
  uint64_t srcOffset = 0;  // elements
  uint64_t dstOffset = 0;  // elements
  uint64_t count = 0;      // elements
};

// At the start of the encoded bytes; the tables follow at the byte offsets it names. Everything here
// holds for every call of the same shape (the plan, its channels and FIFOs): the encoding is made once
// and kept in device memory (device/plan_cache.h); what each call brings is a DevicePlanCall.
struct DevicePlanHeader {
  int32_t rank = 0;
  int32_t nranks = 1;
  uint32_t nchannels = 1;  // of the FIFO tables
  uint32_t nlanes = 0;
  uint32_t nsteps = 0;
  uint32_t nbuffers = 0;  // buffer indices the steps may name (a call binds that many)
  uint32_t elemSize = 1;
  loomDataType_t dtype = loomUint8;
  uint32_t profile = 0;  // non-zero: every lane times its steps into its status (DeviceLaneProfile)
  uint32_t reserved = 0;
  uint64_t timeoutNs = 0;     // a wait without progress this long fails (0: never)
  uint32_t* abort = nullptr;  // non-zero: stop waiting (null: no abort word)
  uint64_t laneOffset = 0, stepOffset = 0, sendFifoOffset = 0, recvFifoOffset = 0;
  uint64_t totalBytes = 0;
  // Peer-memory plans: nranks pointers to each rank's boards (DevicePeerBoard[boardChannels], as this
  // rank sees them) at boardOffset, coherent at boardScope; boardOffset 0: none (no Meet in the plan).
  uint64_t boardOffset = 0;
  uint32_t boardChannels = 0;
  FifoScope boardScope = FifoScope::System;
  // Non-null: the ranks are processes, and a peer's published buffers are translated through its
  // windows (DeviceWindowTable); null: every rank addresses every buffer as published.
  const DeviceWindowTable* windows = nullptr;
};

// What one call of an encoded plan binds: its buffers, its operator (a PreMulSum or an average carries
// values of its own) and where its lanes report. Passed to the kernel as a parameter (DeviceLaunchArgs),
// so that a call of a shape already on the device copies nothing to it.
inline constexpr uint32_t kInlineBuffers = 4;  // a collective's send, recv, scratch; a lone send/recv's 4th
struct DevicePlanCall {
  char* buffers[kInlineBuffers] = {};
  char* const* bufferTable = nullptr;  // more than kInlineBuffers buffers: all of them, in device memory
  DeviceLaneStatus* laneStatus = nullptr;  // nlanes entries, in memory the host reads (pinned)
  ReduceOp op;
};

// The plan kernel's parameter: a sequence of encoded plans (DevicePlanSequence) and each plan's call,
// the first kInlinePlans of them inline, or all of them in device memory (`callTable`) when more.
inline constexpr uint32_t kInlinePlans = 8;
struct DeviceLaunchArgs {
  const void* sequence = nullptr;
  const DevicePlanCall* callTable = nullptr;
  DevicePlanCall calls[kInlinePlans];
};

// Several encoded plans of one dtype that one launch runs one after the other (a group's operations
// on one communicator): every block runs its lane of each plan (when the plan has that many lanes),
// and the launch's blocks meet between two plans, so that a plan starts only when this rank finished
// the one before (it may read what another lane of the previous plan wrote). The plans' encodings
// follow, at the byte offsets (from this struct's first byte) in the table right after it. The same
// sequence serves every call of its shape: the last block to finish sets `arrived` back to 0 (launches
// of one communicator run one after another, so the next one finds it so).
struct alignas(128) DevicePlanSequence {
  uint64_t arrived = 0;  // blocks count themselves here after each plan; on its own 128-byte line
  uint32_t nplans = 0;
  uint32_t blocks = 0;  // the launch's blocks: the most lanes of any of its plans
};

// What the host needs to launch an encoded plan without reading it back.
struct DevicePlanShape {
  uint32_t lanes = 0;  // one block per lane
  size_t bytes = 0;    // of the encoding
};

}  // namespace loom::cuda
