// Which pairs of ranks the p2p transport (p2p_fifos.h) serves: a pure decision over what every rank
// tells the others at setup, so that every rank reaches the same answer from the same facts. Host
// code, built in every configuration (and tested without a GPU).
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace loom::device {

// LOOM_DEVICE_PLANS on one rank.
enum class P2pPolicy : int32_t {
  Off = 0,       // device buffers are always staged through host memory
  Forced = 1,    // also for ranks sharing one GPU (NCCL refuses them; see p2pPairRefusal)
  Auto = 2,      // when every pair of ranks on one host is on different GPUs with peer access
  Required = 3,  // as Forced, and plan kernels that cannot run are an error instead of staging
};
P2pPolicy p2pPolicyFromEnvironment();

// The ranks' settings combined: any Off wins; all Forced or Required force; else Auto.
P2pPolicy combineP2pPolicies(std::span<const P2pPolicy> policies);
// Whether some rank requires plan kernels (then a refusal fails the operation on every rank).
bool p2pRequired(std::span<const P2pPolicy> policies);

// What the decision needs to know of one rank.
struct P2pEndpoint {
  uint64_t hostHash = 0;
  std::string busId;  // the GPU as every process names it (device ordinals depend on CUDA_VISIBLE_DEVICES)
  bool netLanes = false;  // reaches peers on other hosts through network lanes (device_layer.h's NetLanes)
};

// Why ranks `ra` and `rb` should not run plan kernels against each other under the combined `policy`,
// or "". Ranks on different hosts run against each other through network lanes when both have them.
// Peer access between two GPUs is checked by the ranks themselves (p2p_fifos.cc).
std::string p2pPairRefusal(const P2pEndpoint& a, int ra, const P2pEndpoint& b, int rb, P2pPolicy policy);

// The first round of the p2p transport's setup (p2p_fifos.h): what every rank tells the others before
// anything is allocated, so that all of them reach the same verdict and none allocates in vain.
struct P2pFacts {
  uint64_t hostHash = 0;
  uint64_t nonce = 0;
  int32_t pid = 0;
  int32_t device = -1;
  int32_t policy = static_cast<int32_t>(P2pPolicy::Auto);
  uint32_t ok = 0;              // the rank's local queries (bus id, occupancy) succeeded
  uint32_t residentBlocks = 0;  // plan-kernel blocks its GPU holds at once
  uint32_t nchannels = 0, nslots = 0;  // the FIFO layout: every rank must use the same
  uint64_t slotBytes = 0;
  uint32_t netLanes = 0;  // the rank has network lanes for peers on other hosts
  uint32_t peerMemory = 0;  // its LOOM_DEVICE_PEER_MEMORY allows peer-memory plans
  char busId[32] = {0};  // the GPU, as every process names it (ordinals depend on CUDA_VISIBLE_DEVICES)
  char why[160] = {0};   // when !ok
  std::string bus() const;
};

// The verdict from every rank's facts: "" when plan kernels may be set up, else why not (the first
// rank with LOOM_DEVICE_PLANS=0, a failed local query, FIFO layouts that differ, a pair refused).
std::string p2pSetupRefusal(std::span<const P2pFacts> facts);
// How many ranks of `facts` run on `gpu`'s GPU (same host, same bus id).
uint32_t p2pRanksOnGpu(std::span<const P2pFacts> facts, const P2pFacts& gpu);
// The most plan-kernel blocks one rank may have resident: the fewest, over the job's GPUs, of the
// GPU's resident blocks divided among the ranks on it (same host, same bus id).
uint32_t p2pResidentShare(std::span<const P2pFacts> facts);

}  // namespace loom::device
