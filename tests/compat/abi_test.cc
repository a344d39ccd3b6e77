// Loom's declaration of NCCL's ABI (src/compat/nccl_abi.h) against NVIDIA's nccl.h, at compile time:
// every enum value, struct size and field offset the drop-in relies on. Built once per NVIDIA header
// found (the CUDA toolkit's, and nvidia-nccl-cu13's when it is installed); a mismatch does not compile.
#include <nccl.h>

#include <cstddef>
#include <cstdio>
#include <type_traits>

#include "compat/nccl_abi.h"
#include "loom.h"

namespace mine = loom::compat;

#define SAME_VALUE(name) static_assert(static_cast<long long>(mine::name) == static_cast<long long>(::name), #name)

// Results, data types, operators, scalar residence.
SAME_VALUE(ncclSuccess);
SAME_VALUE(ncclUnhandledCudaError);
SAME_VALUE(ncclSystemError);
SAME_VALUE(ncclInternalError);
SAME_VALUE(ncclInvalidArgument);
SAME_VALUE(ncclInvalidUsage);
SAME_VALUE(ncclRemoteError);
SAME_VALUE(ncclInProgress);
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 30, 0)  // 2.28 has no ncclTimeout (its ncclNumResults is 8)
SAME_VALUE(ncclTimeout);
SAME_VALUE(ncclNumResults);
#endif
SAME_VALUE(ncclSum);
SAME_VALUE(ncclProd);
SAME_VALUE(ncclMax);
SAME_VALUE(ncclMin);
SAME_VALUE(ncclAvg);
SAME_VALUE(ncclNumOps);
SAME_VALUE(ncclMaxRedOp);
SAME_VALUE(ncclInt8);
SAME_VALUE(ncclChar);
SAME_VALUE(ncclUint8);
SAME_VALUE(ncclInt32);
SAME_VALUE(ncclInt);
SAME_VALUE(ncclUint32);
SAME_VALUE(ncclInt64);
SAME_VALUE(ncclUint64);
SAME_VALUE(ncclFloat16);
SAME_VALUE(ncclHalf);
SAME_VALUE(ncclFloat32);
SAME_VALUE(ncclFloat);
SAME_VALUE(ncclFloat64);
SAME_VALUE(ncclDouble);
SAME_VALUE(ncclBfloat16);
SAME_VALUE(ncclFloat8e4m3);
SAME_VALUE(ncclFloat8e5m2);
SAME_VALUE(ncclNumTypes);
SAME_VALUE(ncclScalarDevice);
SAME_VALUE(ncclScalarHostImmediate);

static_assert(sizeof(mine::ncclResult_t) == sizeof(::ncclResult_t));
static_assert(sizeof(mine::ncclRedOp_t) == sizeof(::ncclRedOp_t));
static_assert(sizeof(mine::ncclDataType_t) == sizeof(::ncclDataType_t));
static_assert(sizeof(mine::ncclScalarResidence_t) == sizeof(::ncclScalarResidence_t));
static_assert(sizeof(mine::ncclUniqueId) == sizeof(::ncclUniqueId) && mine::kNcclUniqueIdBytes == NCCL_UNIQUE_ID_BYTES);
static_assert(std::is_same_v<mine::cudaStream_t, ::cudaStream_t>);

// Constants a caller's struct carries or the functions take.
constexpr ::ncclConfig_t kTheirConfig = NCCL_CONFIG_INITIALIZER;
static_assert(mine::kNcclConfigMagic == kTheirConfig.magic && mine::kNcclConfigUndefInt == kTheirConfig.blocking);
constexpr ::ncclSimInfo_t kTheirSimInfo = NCCL_SIM_INFO_INITIALIZER;
static_assert(mine::kNcclSimInfoMagic == kTheirSimInfo.magic && mine::kNcclUndefFloat == kTheirSimInfo.estimatedTime);
static_assert(mine::kNcclConfigUndefInt == NCCL_CONFIG_UNDEF_INT);
static_assert(mine::kNcclSplitNoColor == NCCL_SPLIT_NOCOLOR);
static_assert(mine::ncclVersionCode(2, 8, 4) == NCCL_VERSION(2, 8, 4));
static_assert(mine::ncclVersionCode(2, 30, 7) == NCCL_VERSION(2, 30, 7));

// The config: every field the header being checked has sits where the drop-in reads it (older
// headers have a prefix of 2.30's fields; the drop-in reads a caller's struct by its size).
#define SAME_OFFSET(type, field) static_assert(offsetof(mine::type, field) == offsetof(::type, field), #type "." #field)
SAME_OFFSET(ncclConfig_t, size);
SAME_OFFSET(ncclConfig_t, magic);
SAME_OFFSET(ncclConfig_t, version);
SAME_OFFSET(ncclConfig_t, blocking);
SAME_OFFSET(ncclConfig_t, cgaClusterSize);
SAME_OFFSET(ncclConfig_t, minCTAs);
SAME_OFFSET(ncclConfig_t, maxCTAs);
SAME_OFFSET(ncclConfig_t, netName);
SAME_OFFSET(ncclConfig_t, splitShare);
SAME_OFFSET(ncclConfig_t, trafficClass);
SAME_OFFSET(ncclConfig_t, commName);
SAME_OFFSET(ncclConfig_t, collnetEnable);
SAME_OFFSET(ncclConfig_t, CTAPolicy);
SAME_OFFSET(ncclConfig_t, shrinkShare);
SAME_OFFSET(ncclConfig_t, nvlsCTAs);
SAME_OFFSET(ncclConfig_t, nChannelsPerNetPeer);
SAME_OFFSET(ncclConfig_t, nvlinkCentricSched);
static_assert(mine::kNcclShrinkAbort == NCCL_SHRINK_ABORT);
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 30, 0)  // what 2.29 and 2.30 added
SAME_OFFSET(ncclConfig_t, graphUsageMode);
SAME_OFFSET(ncclConfig_t, numRmaCtx);
SAME_OFFSET(ncclConfig_t, maxP2pPeers);
SAME_OFFSET(ncclConfig_t, graphStreamOrdering);
static_assert(sizeof(mine::ncclConfig_t) == sizeof(::ncclConfig_t), "2.30's config, whole");
SAME_VALUE(ncclStatGpuMemSuspend);
SAME_VALUE(ncclStatGpuMemSuspended);
SAME_VALUE(ncclStatGpuMemPersist);
SAME_VALUE(ncclStatGpuMemTotal);
SAME_OFFSET(ncclWaitSignalDesc_t, opCnt);
SAME_OFFSET(ncclWaitSignalDesc_t, peer);
SAME_OFFSET(ncclWaitSignalDesc_t, sigIdx);
SAME_OFFSET(ncclWaitSignalDesc_t, ctx);
static_assert(sizeof(mine::ncclWaitSignalDesc_t) == sizeof(::ncclWaitSignalDesc_t));
#endif
#if __has_include(<nccl_device/core.h>)
#include <nccl_device/core.h>
SAME_OFFSET(ncclTeam_t, nRanks);
SAME_OFFSET(ncclTeam_t, rank);
SAME_OFFSET(ncclTeam_t, stride);
static_assert(sizeof(mine::ncclTeam_t) == sizeof(::ncclTeam_t));
#endif
static_assert(sizeof(mine::ncclConfig_t) >= sizeof(::ncclConfig_t), "an older header's config is a prefix");
SAME_OFFSET(ncclSimInfo_t, size);
SAME_OFFSET(ncclSimInfo_t, magic);
SAME_OFFSET(ncclSimInfo_t, version);
SAME_OFFSET(ncclSimInfo_t, estimatedTime);
static_assert(sizeof(mine::ncclSimInfo_t) == sizeof(::ncclSimInfo_t));

// Loom's own API has NCCL's values, so the exports pass them through with casts.
static_assert(static_cast<int>(loomInvalidUsage) == static_cast<int>(::ncclInvalidUsage) &&
              static_cast<int>(loomInProgress) == static_cast<int>(::ncclInProgress));
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 30, 0)
static_assert(static_cast<int>(loomTimeout) == static_cast<int>(::ncclTimeout) &&
              static_cast<int>(loomNumResults) == static_cast<int>(::ncclNumResults));
#endif
static_assert(static_cast<int>(loomFloat8e5m2) == static_cast<int>(::ncclFloat8e5m2) &&
              static_cast<int>(loomBfloat16) == static_cast<int>(::ncclBfloat16) &&
              static_cast<int>(loomNumTypes) == static_cast<int>(::ncclNumTypes));
static_assert(static_cast<int>(loomAvg) == static_cast<int>(::ncclAvg) &&
              static_cast<int>(loomNumOps) == static_cast<int>(::ncclNumOps));
static_assert(sizeof(loomUniqueId) == sizeof(::ncclUniqueId) && sizeof(loomRedOp_t) == sizeof(::ncclRedOp_t));
static_assert(static_cast<int>(loomScalarHostImmediate) == static_cast<int>(::ncclScalarHostImmediate));

int main() {
  std::printf("NCCL %d.%d.%d's header: every value, size and offset the drop-in relies on matches\n", NCCL_MAJOR,
              NCCL_MINOR, NCCL_PATCH);
  return 0;
}
