// NCCL's spelling of the settings Loom reads after translating them (settings.def's `Translated`):
// NCCL_ALGO and NCCL_PROTO name NCCL's algorithms and protocols in lists ("Ring,Tree", "^NVLS",
// "allreduce:tree;broadcast:ring": NCCL_ALGO's per-collective sections become LOOM_ALGO's rules), NCCL_DEBUG has levels Loom lacks (VERSION, ABORT, NONE), and
// NCCL_DEBUG_SUBSYS names NCCL's subsystems, NCCL_RUNTIME_CONNECT is 0 or 1. Each is turned into the value of its LOOM_* setting where
// one says the same thing, or refused with the reason (logged at INFO by logUnreadNcclVariables).
#pragma once

#include <string>
#include <string_view>

#include "base/settings.h"

namespace loom {

struct NcclTranslation {
  std::string value;   // the LOOM_* value meaning the same; empty when there is none
  std::string whyNot;  // when value is empty: why the NCCL value is not read
  std::string leftOut{};  // when value is not empty: the parts of the NCCL value it leaves out, and why
};

// `setting` must be one whose NCCL variable is marked Translated.
NcclTranslation translateNcclValue(Setting setting, std::string_view ncclText);

}  // namespace loom
