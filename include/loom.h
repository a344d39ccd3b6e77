/*
 * Loom: collective communication for GPUs and CPU processes.
 *
 * The C API mirrors NCCL's (types, values, argument order and in-place rules) with the `loom` prefix,
 * so that code written for NCCL ports by renaming. This header is C11 and includes no CUDA header:
 * a cudaStream_t converts implicitly to loomStream_t.
 */
#ifndef LOOM_H_
#define LOOM_H_

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define LOOM_API
#elif defined(LOOM_BUILDING_LIBRARY)
#define LOOM_API __attribute__((visibility("default")))
#else
#define LOOM_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define LOOM_MAJOR 0
#define LOOM_MINOR 1
#define LOOM_PATCH 0
#define LOOM_VERSION_CODE (LOOM_MAJOR * 10000 + LOOM_MINOR * 100 + LOOM_PATCH)

/* Same layout as cudaStream_t, so a CUDA stream can be passed without a cast. */
typedef struct CUstream_st* loomStream_t;

typedef struct loomComm* loomComm_t;

#define LOOM_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[LOOM_UNIQUE_ID_BYTES];
} loomUniqueId;

typedef enum {
  loomSuccess = 0,
  loomUnhandledCudaError = 1,
  loomSystemError = 2,
  loomInternalError = 3,
  loomInvalidArgument = 4,
  loomInvalidUsage = 5,
  loomRemoteError = 6,
  loomInProgress = 7,
  loomTimeout = 8,
  loomNumResults = 9
} loomResult_t;

typedef enum {
  loomInt8 = 0,
  loomChar = 0,
  loomUint8 = 1,
  loomInt32 = 2,
  loomInt = 2,
  loomUint32 = 3,
  loomInt64 = 4,
  loomUint64 = 5,
  loomFloat16 = 6,
  loomHalf = 6,
  loomFloat32 = 7,
  loomFloat = 7,
  loomFloat64 = 8,
  loomDouble = 8,
  loomBfloat16 = 9,
  loomFloat8e4m3 = 10,
  loomFloat8e5m2 = 11,
  loomNumTypes = 12,
  /* Not a type. It gives the enum the whole range of int, so that C++ (the library, and C++ callers
   * such as tests) may hold any value a C caller passes and reject it; a value outside an enum's range
   * is undefined behaviour in C++ (UndefinedBehaviorSanitizer reports dtype 99 and -1 otherwise). */
  loomDataTypeIntRange = INT32_MIN
} loomDataType_t;

/* Values >= loomNumOps are custom operators made by loomRedOpCreatePreMulSum. */
typedef enum {
  loomSum = 0,
  loomProd = 1,
  loomMax = 2,
  loomMin = 3,
  loomAvg = 4,
  loomNumOps = 5,
  loomMaxRedOp = 0x7fffffff,
  loomRedOpIntRange = INT32_MIN /* not an operator: the whole range of int, as for loomDataTypeIntRange */
} loomRedOp_t;

typedef enum { loomScalarDevice = 0, loomScalarHostImmediate = 1 } loomScalarResidence_t;

#define LOOM_SPLIT_NOCOLOR (-1)
#define LOOM_CONFIG_UNDEF_INT INT32_MIN
#define LOOM_CONFIG_MAGIC 0x6c6f6f6du /* "loom" */

/* Always initialise with LOOM_CONFIG_INITIALIZER: the hidden fields let the library accept structs
 * from older headers. Fields left at LOOM_CONFIG_UNDEF_INT / NULL take their defaults. */
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;         /* 1 (default): calls return when done; 0: may return loomInProgress */
  const char* commName; /* appears in logs and error messages */
  int timeoutMs;        /* per-operation progress timeout; default LOOM_TIMEOUT_MS or 10 minutes */
  int splitShare;       /* accepted for NCCL compatibility; resources are never shared */
} loomConfig_t;

#define LOOM_CONFIG_INITIALIZER                                                               \
  {                                                                                           \
    sizeof(loomConfig_t), LOOM_CONFIG_MAGIC, LOOM_VERSION_CODE, LOOM_CONFIG_UNDEF_INT, NULL, \
        LOOM_CONFIG_UNDEF_INT, LOOM_CONFIG_UNDEF_INT                                          \
  }

LOOM_API loomResult_t loomGetVersion(int* version);
/* Which memory kinds this library serves on this machine: LOOM_MEMORY_HOST always, LOOM_MEMORY_CUDA
 * when it was built with CUDA and CUDA is usable here (a driver and a visible device). A library
 * without it treats every pointer as host memory, so callers holding device memory (a framework's
 * CUDA tensors) should ask first. */
#define LOOM_MEMORY_HOST 1
#define LOOM_MEMORY_CUDA 2
LOOM_API loomResult_t loomGetMemoryKinds(int* kinds);
/* Device memory on the current CUDA device (NCCL's ncclMemAlloc/ncclMemFree): loomInvalidUsage, saying
 * why, where this library serves no device memory (a build without CUDA, or no driver or GPU).
 * loomMemFree(NULL) does nothing. */
LOOM_API loomResult_t loomMemAlloc(void** ptr, size_t size);
LOOM_API loomResult_t loomMemFree(void* ptr);
LOOM_API const char* loomGetErrorString(loomResult_t result);
/* The last error seen by this communicator (or by this thread when comm is NULL), with the peer
 * and operation involved. Never NULL. */
LOOM_API const char* loomGetLastError(loomComm_t comm);

/* Settings (the LOOM_* environment variables), shaped after NCCL 2.30's ncclParam*. A key is the
 * variable's name with or without the LOOM_ prefix, in any case ("LOOM_TIMEOUT_MS", "timeout_ms"), or
 * the NCCL variable a setting reads ("NCCL_SOCKET_IFNAME": README, "Environment").
 * Values are the environment's, else the documented default; a setting whose default is computed
 * where it is used (LOOM_SPIN_US, LOOM_DEVICE_LL_BYTES) reads as "(computed)" while unset, and its
 * integer getters then return loomInvalidUsage. An unknown key is loomInvalidArgument. */
typedef struct loomParamHandle* loomParamHandle_t;
LOOM_API loomResult_t loomParamBind(loomParamHandle_t* out, const char* key);
/* Integer and flag settings as the type of `out` (loomInvalidArgument for a text setting or a value
 * the type cannot hold). */
LOOM_API loomResult_t loomParamGetI8(loomParamHandle_t h, int8_t* out);
LOOM_API loomResult_t loomParamGetI16(loomParamHandle_t h, int16_t* out);
LOOM_API loomResult_t loomParamGetI32(loomParamHandle_t h, int32_t* out);
LOOM_API loomResult_t loomParamGetI64(loomParamHandle_t h, int64_t* out);
LOOM_API loomResult_t loomParamGetU8(loomParamHandle_t h, uint8_t* out);
LOOM_API loomResult_t loomParamGetU16(loomParamHandle_t h, uint16_t* out);
LOOM_API loomResult_t loomParamGetU32(loomParamHandle_t h, uint32_t* out);
LOOM_API loomResult_t loomParamGetU64(loomParamHandle_t h, uint64_t* out);
/* Any setting as text, valid until this thread's next loomParamGetStr. */
LOOM_API loomResult_t loomParamGetStr(loomParamHandle_t h, const char** out);
/* As text, copied into out (at most maxLen bytes, NUL included); *len: the text's length + 1. */
LOOM_API loomResult_t loomParamGet(loomParamHandle_t h, void* out, int maxLen, int* len);
/* By key, as text, valid until this thread's next loomParamGetParameter. */
LOOM_API loomResult_t loomParamGetParameter(const char* key, const char** value, int* valueLen);
/* Every setting's name, valid until this thread's next call. */
LOOM_API loomResult_t loomParamGetAllParameterKeys(const char*** table, int* tableLen);
/* Every setting with its value and where it comes from, to the log (LOOM_DEBUG=INFO shows it) and,
 * unlike NCCL, to stderr when logging is off. */
LOOM_API void loomParamDumpAll(void);

LOOM_API loomResult_t loomGetUniqueId(loomUniqueId* uniqueId);
LOOM_API loomResult_t loomCommInitRank(loomComm_t* comm, int nranks, loomUniqueId commId, int rank);
LOOM_API loomResult_t loomCommInitRankConfig(loomComm_t* comm, int nranks, loomUniqueId commId,
                                             int rank, loomConfig_t* config);
/* devlist == NULL: ndev host ranks as threads of this process. */
LOOM_API loomResult_t loomCommInitAll(loomComm_t* comms, int ndev, const int* devlist);
LOOM_API loomResult_t loomCommSplit(loomComm_t comm, int color, int key, loomComm_t* newcomm,
                                    loomConfig_t* config);
LOOM_API loomResult_t loomCommFinalize(loomComm_t comm);
LOOM_API loomResult_t loomCommDestroy(loomComm_t comm);
LOOM_API loomResult_t loomCommAbort(loomComm_t comm);

/*
 * Going on without lost ranks, and admitting new ones (NCCL 2.27-2.29's shrink, revoke and grow).
 *
 * loomCommRevoke: this rank's outstanding operations on comm fail at once, and so do its peers'
 * operations waiting on it (they are told); later operations are refused ("was revoked"). It returns
 * once no operation of this rank runs on comm. Ready for loomCommShrink or loomCommDestroy.
 * revokeFlags must be LOOM_REVOKE_DEFAULT.
 *
 * loomCommShrink: every rank of comm not in excludeRanks calls it with the same list; *newcomm holds
 * them in their old order, renumbered from 0. No rendezvous of the parent is repeated: the first
 * remaining rank hands a new communicator's id to the others over connections made from the
 * addresses the parent's init exchanged, so an excluded (dead) rank takes no part. Without
 * LOOM_SHRINK_ABORT it waits for the parent's operations of this rank to end; with it they are
 * revoked first (after a failure, when a peer is dead). A rank that dies during the call makes it fail
 * within the new communicator's timeout. config NULL: the parent's name and timeout.
 *
 * loomCommGetUniqueId + loomCommGrow: one rank of comm calls loomCommGetUniqueId and hands the id to
 * the ranks that join; then every rank of comm calls loomCommGrow(comm, nranks, NULL, -1, ...) (they
 * keep their numbers; the id reaches them through comm) and every joining rank calls
 * loomCommGrow(NULL, nranks, &id, rank, ...) with rank from comm's size to nranks - 1. */
/*
 * Who is stuck. loomCommDumpState writes this rank's state of comm as JSON into buffer (*bytes: its
 * size in, the size needed out; too small: loomInvalidArgument): the last 64 operations it issued
 * (number, collective, count, datatype, root or peer, age), how far they completed, the error that
 * broke the communicator, and the peers it reaches by transport with the network connections it holds
 * open ("connections"). It takes no lock an operation holds: it answers while the rank is wedged in
 * an operation. loomHangReport lines up the states of every rank (states[r] NULL: rank r could not be
 * reached) into one report: the oldest operation not finished everywhere, the ranks that never entered
 * it, the ranks waiting in it, ranks that called another collective or size at that number, the
 * errors recorded, the unreachable ranks. LOOM_REPORT_TEXT is for a person, LOOM_REPORT_JSON for tools. */
#define LOOM_REPORT_TEXT 0
#define LOOM_REPORT_JSON 1
LOOM_API loomResult_t loomCommDumpState(loomComm_t comm, char* buffer, size_t* bytes);
LOOM_API loomResult_t loomHangReport(const char* const* states, int nstates, int format, char* buffer, size_t* bytes);

#define LOOM_REVOKE_DEFAULT 0
#define LOOM_SHRINK_DEFAULT 0x0
#define LOOM_SHRINK_ABORT 0x1
LOOM_API loomResult_t loomCommRevoke(loomComm_t comm, int revokeFlags);
LOOM_API loomResult_t loomCommShrink(loomComm_t comm, int* excludeRanks, int excludeRanksCount, loomComm_t* newcomm,
                                     loomConfig_t* config, int shrinkFlags);
LOOM_API loomResult_t loomCommGetUniqueId(loomComm_t comm, loomUniqueId* uniqueId);
LOOM_API loomResult_t loomCommGrow(loomComm_t comm, int nranks, const loomUniqueId* uniqueId, int rank,
                                   loomComm_t* newcomm, loomConfig_t* config);
LOOM_API loomResult_t loomCommGetAsyncError(loomComm_t comm, loomResult_t* asyncError);
LOOM_API loomResult_t loomCommCount(const loomComm_t comm, int* count);
LOOM_API loomResult_t loomCommCuDevice(const loomComm_t comm, int* device);
LOOM_API loomResult_t loomCommUserRank(const loomComm_t comm, int* rank);

LOOM_API loomResult_t loomRedOpCreatePreMulSum(loomRedOp_t* op, void* scalar, loomDataType_t datatype,
                                               loomScalarResidence_t residence, loomComm_t comm);
LOOM_API loomResult_t loomRedOpDestroy(loomRedOp_t op, loomComm_t comm);

LOOM_API loomResult_t loomReduce(const void* sendbuff, void* recvbuff, size_t count,
                                 loomDataType_t datatype, loomRedOp_t op, int root, loomComm_t comm,
                                 loomStream_t stream);
LOOM_API loomResult_t loomBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                    loomDataType_t datatype, int root, loomComm_t comm,
                                    loomStream_t stream);
LOOM_API loomResult_t loomAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                    loomDataType_t datatype, loomRedOp_t op, loomComm_t comm,
                                    loomStream_t stream);
/* In place when recvbuff == sendbuff + rank*recvcount. */
LOOM_API loomResult_t loomReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                        loomDataType_t datatype, loomRedOp_t op, loomComm_t comm,
                                        loomStream_t stream);
/* In place when sendbuff == recvbuff + rank*sendcount. */
LOOM_API loomResult_t loomAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                    loomDataType_t datatype, loomComm_t comm, loomStream_t stream);
/* count elements go to (and come from) each peer. */
LOOM_API loomResult_t loomAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                   loomDataType_t datatype, loomComm_t comm, loomStream_t stream);
LOOM_API loomResult_t loomGather(const void* sendbuff, void* recvbuff, size_t count,
                                 loomDataType_t datatype, int root, loomComm_t comm,
                                 loomStream_t stream);
LOOM_API loomResult_t loomScatter(const void* sendbuff, void* recvbuff, size_t count,
                                  loomDataType_t datatype, int root, loomComm_t comm,
                                  loomStream_t stream);
LOOM_API loomResult_t loomSend(const void* sendbuff, size_t count, loomDataType_t datatype, int peer,
                               loomComm_t comm, loomStream_t stream);
LOOM_API loomResult_t loomRecv(void* recvbuff, size_t count, loomDataType_t datatype, int peer,
                               loomComm_t comm, loomStream_t stream);
/* Receives count elements from whichever rank's send arrives first (MPI_ANY_SOURCE) and writes
 * that rank to *source once the receive completed (a nonblocking communicator: after
 * loomCommWaitOp). It takes the next message of that rank, as loomRecv would: it waits for the
 * receives issued before it, and later ones wait for it. Only sends match it, never a collective's
 * traffic; the send must have the same size in bytes. Inside a group it must be the only receive.
 * Device buffers are staged through host memory; on a communicator that runs device buffers in plan
 * kernels (a sender's device buffer would travel through GPU FIFOs) it is refused with
 * loomInvalidUsage. */
LOOM_API loomResult_t loomRecvAny(void* recvbuff, size_t count, loomDataType_t datatype, int* source,
                                  loomComm_t comm, loomStream_t stream);

LOOM_API loomResult_t loomGroupStart(void);
LOOM_API loomResult_t loomGroupEnd(void);
/* Ends the group as loomGroupEnd does but runs none of its operations: *estimatedUs receives the time
 * Loom's cost model predicts for them on this rank, in microseconds (each communicator's collectives
 * one after another as the tuner would plan them, then its sends and receives; communicators side by
 * side). An inner level (nested groups) closes and reports 0: the outermost end decides. NCCL's
 * ncclGroupSimulateEnd is answered with it. */
LOOM_API loomResult_t loomGroupSimulateEnd(double* estimatedUs);

/*
 * Loom extension (not in NCCL): asynchronous host operations.
 *
 * On a communicator made with config.blocking = 0, host-memory operations run on the communicator's
 * own progress thread: each call validates its arguments, queues the operation and returns at once.
 * Operations start in call order, except that point-to-point operations only wait for earlier ones
 * that use the same peer in the same direction, so a send never waits for a later receive (and
 * batch_isend_irecv-style exchanges cannot deadlock). Buffers belong to Loom until the operation
 * completes. On a blocking communicator operations are complete when their call returns, and these
 * functions simply report that.
 */
/* The id of the last operation (or group) this communicator accepted; ids grow from 1. */
LOOM_API loomResult_t loomCommLastOpId(loomComm_t comm, uint64_t* opId);
/* Waits up to timeoutMs (0: just test; -1: forever) for operation opId and all operations the
 * communicator accepted before it to complete. loomSuccess when they have, loomInProgress when time
 * ran out first, or the error that stopped the communicator. */
LOOM_API loomResult_t loomCommWaitOp(loomComm_t comm, uint64_t opId, int64_t timeoutMs);

/*
 * Loom extension (not in NCCL): where plan kernels spend their time (CUDA builds). With
 * LOOM_DEVICE_PROFILE=1 every lane of every plan kernel reads the GPU's clock around the parts of each
 * of its steps. loomCommDeviceProfile sums what this rank's finished launches on comm reported since the
 * communicator was made or last reset (reset non-zero: zeroed once read). Launches still running are
 * not counted (synchronize their streams first), nor replays of captured CUDA graphs. Times are summed
 * over lanes, each as its first thread saw it. loomInvalidUsage where profiling is off or comm has no
 * plan kernels (no device operation ran as one yet, or they are unavailable).
 */
typedef struct {
  uint64_t launches;   /* kernels whose lanes reported */
  uint64_t lanes;      /* lanes that reported (one thread block each) */
  uint64_t steps;      /* steps those lanes ran */
  uint64_t bytes;      /* data those steps moved: each step's elements, in bytes */
  uint64_t waitNs;     /* waiting for free slots and for the peers' messages */
  uint64_t dataNs;     /* copying and reducing */
  uint64_t publishNs;  /* publishing: the release of the FIFOs' counters */
  uint64_t laneNs;     /* each lane from its first step to its last */
} loomDeviceProfile_t;
LOOM_API loomResult_t loomCommDeviceProfile(loomComm_t comm, loomDeviceProfile_t* profile, int reset);

/*
 * Windows (NCCL's ncclCommWindowRegister): device buffers every rank registers collectively. Rank
 * processes sharing one GPU then read and write each other's buffers directly (peer-memory plans: one
 * handshake per call, no FIFO) in collectives whose input and output lie in windows, as rank threads
 * of one process always may; elsewhere a window changes nothing. Every rank calls it, in the same
 * order, with a buffer of its own (sizes may differ), and keeps the memory allocated until the window
 * is deregistered; the memory must be one CUDA IPC can share (cudaMalloc's; not stream-ordered pools'
 * or cuMem allocations'). Every rank passes buffers of its windows to a collective, or none does:
 * ranks that disagree fail, or wait out LOOM_TIMEOUT_MS. At most 64 windows per communicator.
 * loomInvalidArgument on every rank, naming the rank and why, when one rank's buffer cannot be a window.
 * Inside loomGroupStart/End both calls run at the group's end (each communicator's in call order), and
 * that end returns their failure; *win is set at once.
 */
typedef struct loomWindow* loomWindow_t;
LOOM_API loomResult_t loomCommWindowRegister(loomComm_t comm, void* buff, size_t size, loomWindow_t* win);
/* Collective: ends the window on every rank, once this rank's operations on comm in flight finished. */
LOOM_API loomResult_t loomCommWindowDeregister(loomComm_t comm, loomWindow_t win);
/* The buffer a window was registered with, as this rank addresses it. */
LOOM_API loomResult_t loomWindowGetUserPtr(loomComm_t comm, loomWindow_t win, void** buff);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_H_ */
