// Which pairs of ranks the p2p transport (p2p_fifos.h) serves: a pure decision over what every rank
// tells the others at setup, so that every rank reaches the same answer from the same facts. Host
// code, built in every configuration (and tested without a GPU).
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace loom {

// LOOM_DEVICE_PLANS; the ranks combine their settings: any Off wins, all Forced forces, else Auto.
enum class P2pPolicy : int32_t {
  Off = 0,     // device buffers are always staged through host memory
  Forced = 1,  // also for ranks sharing one GPU (NCCL refuses them; see p2pPairRefusal)
  Auto = 2,    // when every pair of ranks is on different GPUs of one host with peer access
};
P2pPolicy p2pPolicyFromEnvironment();
P2pPolicy combineP2pPolicies(std::span<const P2pPolicy> policies);

// What the decision needs to know of one rank.
struct P2pEndpoint {
  uint64_t hostHash = 0;
  std::string busId;  // the GPU as every process names it (device ordinals depend on CUDA_VISIBLE_DEVICES)
};

// Why ranks `ra` and `rb` should not run plan kernels against each other under `policy`, or "".
// Peer access between two GPUs is checked by the ranks themselves (p2p_fifos.cc).
std::string p2pPairRefusal(const P2pEndpoint& a, int ra, const P2pEndpoint& b, int rb, P2pPolicy policy);

}  // namespace loom
