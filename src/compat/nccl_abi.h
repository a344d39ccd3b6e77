// NCCL's binary interface as the drop-in libnccl.so.2 serves it: the types, values and layouts a
// program compiled against NVIDIA's nccl.h (API 2.30) passes across the library boundary, written
// here so that the library builds without NVIDIA's header (and without CUDA). tests/compat/abi_test.cc
// proves each type, value, size and offset equal to NVIDIA's header where that header exists.
//
// Loom's own API (include/loom.h) was made with the same result codes, data types, operators and
// unique-id size, so the exports convert between the two with casts; abi_test checks that too.
//
// The names are NCCL's, in namespace loom::compat, so that the test can hold them beside NVIDIA's.
// The exported functions themselves are global extern "C" (exports.h).
#pragma once

#include <climits>
#include <cstddef>
#include <cstdint>

struct CUstream_st;  // the CUDA runtime's stream, as cudaStream_t points to it

namespace loom::compat {

typedef struct ncclComm* ncclComm_t;
typedef struct ncclWindow_vidmem* ncclWindow_t;
typedef ::CUstream_st* cudaStream_t;
typedef struct ncclParamHandle* ncclParamHandle_t;

// ncclCommWindowRegister's flags (NCCL 2.27+).
constexpr int kNcclWinCollSymmetric = 0x01;

constexpr int kNcclUniqueIdBytes = 128;
typedef struct {
  char internal[kNcclUniqueIdBytes];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclTimeout = 8,
  ncclNumResults = 9
} ncclResult_t;

// NCCL sizes this enum to int with a dummy and a top value; the operators PreMulSum makes are
// numbered from ncclNumOps up.
typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4, ncclNumOps = 5,
               ncclMaxRedOp = 0x7fffffff } ncclRedOp_t;

typedef enum {
  ncclInt8 = 0, ncclChar = 0, ncclUint8 = 1, ncclInt32 = 2, ncclInt = 2, ncclUint32 = 3, ncclInt64 = 4,
  ncclUint64 = 5, ncclFloat16 = 6, ncclHalf = 6, ncclFloat32 = 7, ncclFloat = 7, ncclFloat64 = 8,
  ncclDouble = 8, ncclBfloat16 = 9, ncclFloat8e4m3 = 10, ncclFloat8e5m2 = 11, ncclNumTypes = 12
} ncclDataType_t;

typedef enum { ncclScalarDevice = 0, ncclScalarHostImmediate = 1 } ncclScalarResidence_t;

typedef enum {
  ncclStatGpuMemSuspend = 0,
  ncclStatGpuMemSuspended = 1,
  ncclStatGpuMemPersist = 2,
  ncclStatGpuMemTotal = 3
} ncclCommMemStat_t;

// The config's and the simulation record's headers: a caller's struct is read by its own size, so a
// program built against an older or newer nccl.h passes only the fields it has.
constexpr unsigned int kNcclConfigMagic = 0xcafebeefu;
constexpr unsigned int kNcclSimInfoMagic = 0x74685283u;
constexpr int kNcclConfigUndefInt = INT_MIN;
constexpr float kNcclUndefFloat = -1.0f;
constexpr int kNcclSplitNoColor = -1;
constexpr int kNcclShrinkAbort = 0x01;

// API 2.30's ncclConfig_t (ncclConfig_v23000); fields after commName arrived in later versions.
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
  int graphUsageMode;
  int numRmaCtx;
  int maxP2pPeers;
  int graphStreamOrdering;
} ncclConfig_t;

typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime;  // microseconds, as NCCL reports it
} ncclSimInfo_t;

typedef struct {
  int opCnt;
  int peer;
  int sigIdx;
  int ctx;
} ncclWaitSignalDesc_t;

// A team of ranks as NCCL's device API names it (nccl_device/core.h), passed and returned by value.
typedef struct {
  int nRanks, rank, stride;
} ncclTeam_t;

// NCCL's version code for major.minor.patch (from 2.9 on: major*10000 + minor*100 + patch).
constexpr int ncclVersionCode(int major, int minor, int patch) {
  return (major <= 2 && minor <= 8) ? major * 1000 + minor * 100 + patch : major * 10000 + minor * 100 + patch;
}

}  // namespace loom::compat
