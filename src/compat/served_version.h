// The NCCL version the drop-in answers ncclGetVersion with: the API level whose functions and
// semantics it serves (2.30: the config struct of 2.30, ncclAlltoAll/Gather/Scatter of 2.28, the
// ncclParam* calls of 2.30). What 2.27-2.30 added that Loom does not serve yet (shrink, revoke, grow,
// suspend, windows, the device API) fails with ncclInvalidUsage and says so in ncclGetLastError;
// README ("Use Loom as libnccl.so.2") says what a caller such as torch then turns on.
#pragma once

#include "compat/nccl_abi.h"

namespace loom::compat {
constexpr int kServedNcclMajor = 2;
constexpr int kServedNcclMinor = 30;
constexpr int kServedNcclPatch = 0;
constexpr int kServedNcclVersion = ncclVersionCode(kServedNcclMajor, kServedNcclMinor, kServedNcclPatch);
}  // namespace loom::compat
