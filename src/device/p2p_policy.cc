#include "transport/p2p_policy.h"

#include <fmt/format.h>

#include "base/env.h"

namespace loom {

P2pPolicy p2pPolicyFromEnvironment() {
  const std::string v = envString("LOOM_DEVICE_PLANS", "auto");
  if (v == "0" || v == "off") return P2pPolicy::Off;
  if (v == "1" || v == "on") return P2pPolicy::Forced;
  return P2pPolicy::Auto;
}

P2pPolicy combineP2pPolicies(std::span<const P2pPolicy> policies) {
  bool allForced = true;
  for (P2pPolicy p : policies) {
    if (p == P2pPolicy::Off) return P2pPolicy::Off;
    allForced = allForced && p == P2pPolicy::Forced;
  }
  return allForced ? P2pPolicy::Forced : P2pPolicy::Auto;
}

std::string p2pPairRefusal(const P2pEndpoint& a, int ra, const P2pEndpoint& b, int rb, P2pPolicy policy) {
  if (policy == P2pPolicy::Off) return fmt::format("LOOM_DEVICE_PLANS=0 on some rank");
  if (a.hostHash != b.hostHash) return fmt::format("ranks {} and {} are on different hosts", ra, rb);
  // Processes sharing a GPU time-slice their kernels unless MPS runs, and a kernel that waits for a
  // peer's kernel then waits a time slice per message. Threads sharing one deadlock when one of them
  // synchronizes the device (cudaFree, the legacy stream) while a peer's operation is pending.
  if (a.busId == b.busId && policy != P2pPolicy::Forced)
    return fmt::format(
        "ranks {} and {} share GPU {} (LOOM_DEVICE_PLANS=1 on every rank runs them as plan kernels anyway: "
        "processes then need MPS, or their kernels time-slice; threads must not synchronize the device, "
        "e.g. with cudaFree or the legacy stream, while a peer's operation is pending)",
        ra, rb, a.busId);
  return "";
}

}  // namespace loom
