#include "compat/config.h"

#include <cstddef>
#include <string>

#include "compat/last_error.h"

namespace loom::compat {
namespace {

// Whether the caller's struct (of `size` bytes) reaches the field at `offset`.
bool has(const ncclConfig_t* c, size_t offset, size_t bytes) { return c->size >= offset + bytes; }

#define LOOM_CONFIG_HAS(c, field) has(c, offsetof(ncclConfig_t, field), sizeof(c->field))

}  // namespace

ncclResult_t readConfig(const ncclConfig_t* config, loomConfig_t* out) {
  *out = LOOM_CONFIG_INITIALIZER;
  if (!config) return ncclSuccess;
  if (config->magic != kNcclConfigMagic || !LOOM_CONFIG_HAS(config, blocking))
    return fail(ncclInvalidArgument,
                "ncclConfig_t was not initialised with NCCL_CONFIG_INITIALIZER (magic " + std::to_string(config->magic) +
                    ", size " + std::to_string(config->size) + ")");
  if (config->blocking != kNcclConfigUndefInt) {
    if (config->blocking != 0 && config->blocking != 1)
      return fail(ncclInvalidArgument, "ncclConfig_t.blocking is " + std::to_string(config->blocking) + ": 0 or 1");
    out->blocking = config->blocking;
  }
  if (LOOM_CONFIG_HAS(config, commName) && config->commName) out->commName = config->commName;
  if (LOOM_CONFIG_HAS(config, splitShare) && config->splitShare != kNcclConfigUndefInt)
    out->splitShare = config->splitShare;
  // The other fields (CTA counts and policy, netName, trafficClass, collnetEnable, NVLS, RMA and graph
  // options) tune NCCL's kernels and transports; Loom's planner and LOOM_* settings decide those, so
  // they are accepted and not used.
  return ncclSuccess;
}

}  // namespace loom::compat

#undef LOOM_CONFIG_HAS  // unity builds: the sources compiled after this one do not see it
