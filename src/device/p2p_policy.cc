#include "device/p2p_policy.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/settings.h"
#include "base/log.h"

namespace loom::device {

P2pPolicy p2pPolicyFromEnvironment() {
  const std::string v = settingChoice(Setting::DevicePlans);  // a bad value: a warning, and auto
  if (v == "0" || v == "off") return P2pPolicy::Off;
  if (v == "1" || v == "on") return P2pPolicy::Forced;
  if (v == "require" || v == "required") return P2pPolicy::Required;
  if (!v.empty() && v != "auto") LOOM_WARN(Init, "LOOM_DEVICE_PLANS={} is not auto, 1, 0 or require; using auto", v);
  return P2pPolicy::Auto;
}

P2pPolicy combineP2pPolicies(std::span<const P2pPolicy> policies) {
  bool allForced = true;
  for (P2pPolicy p : policies) {
    if (p == P2pPolicy::Off) return P2pPolicy::Off;
    allForced = allForced && (p == P2pPolicy::Forced || p == P2pPolicy::Required);
  }
  return allForced ? P2pPolicy::Forced : P2pPolicy::Auto;
}

bool p2pRequired(std::span<const P2pPolicy> policies) {
  return std::find(policies.begin(), policies.end(), P2pPolicy::Required) != policies.end();
}

std::string p2pPairRefusal(const P2pEndpoint& a, int ra, const P2pEndpoint& b, int rb, P2pPolicy policy) {
  if (policy == P2pPolicy::Off) return fmt::format("LOOM_DEVICE_PLANS=0 on some rank");
  if (a.hostHash != b.hostHash) {
    if (a.netLanes && b.netLanes) return "";
    return fmt::format("ranks {} and {} are on different hosts and rank {} has no network lanes for plan kernels", ra,
                       rb, a.netLanes ? rb : ra);
  }
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

std::string P2pFacts::bus() const { return std::string(busId, strnlen(busId, sizeof busId)); }

std::string p2pSetupRefusal(std::span<const P2pFacts> facts) {
  std::vector<P2pPolicy> policies;
  for (const P2pFacts& f : facts) policies.push_back(static_cast<P2pPolicy>(f.policy));
  for (size_t r = 0; r < facts.size(); ++r)
    if (policies[r] == P2pPolicy::Off) return fmt::format("rank {} has LOOM_DEVICE_PLANS=0", r);
  for (const P2pFacts& f : facts)
    if (!f.ok) return std::string(f.why, strnlen(f.why, sizeof f.why));
  for (size_t r = 1; r < facts.size(); ++r)
    if (facts[r].nchannels != facts[0].nchannels || facts[r].nslots != facts[0].nslots ||
        facts[r].slotBytes != facts[0].slotBytes)
      return fmt::format("ranks 0 and {} lay out their FIFOs differently ({} and {} channels, {} and {} slots of {} and "
                         "{} bytes): LOOM_DEVICE_NCHANNELS, LOOM_DEVICE_FIFO_SLOTS and LOOM_DEVICE_CHUNK_BYTES must agree",
                         r, facts[0].nchannels, facts[r].nchannels, facts[0].nslots, facts[r].nslots,
                         facts[0].slotBytes, facts[r].slotBytes);
  const P2pPolicy combined = combineP2pPolicies(policies);
  for (size_t a = 0; a < facts.size(); ++a)
    for (size_t b = a + 1; b < facts.size(); ++b) {
      std::string why = p2pPairRefusal(P2pEndpoint{facts[a].hostHash, facts[a].bus(), facts[a].netLanes != 0},
                                        static_cast<int>(a),
                                        P2pEndpoint{facts[b].hostHash, facts[b].bus(), facts[b].netLanes != 0},
                                        static_cast<int>(b), combined);
      if (!why.empty()) return why;
    }
  return "";
}

uint32_t p2pRanksOnGpu(std::span<const P2pFacts> facts, const P2pFacts& gpu) {
  uint32_t ranks = 0;
  for (const P2pFacts& f : facts) ranks += f.hostHash == gpu.hostHash && f.bus() == gpu.bus() ? 1 : 0;
  return ranks;
}

uint32_t p2pResidentShare(std::span<const P2pFacts> facts) {
  uint32_t share = UINT32_MAX;
  for (const P2pFacts& gpu : facts) share = std::min(share, gpu.residentBlocks / std::max(1u, p2pRanksOnGpu(facts, gpu)));
  return std::max(1u, share);
}

}  // namespace loom::device
