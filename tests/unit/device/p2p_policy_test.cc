// Which ranks the p2p transport serves (src/device/p2p_policy.h): every rank decides from the same
// offers, so these pure rules are what keeps the ranks of a communicator on one path.
#include "device/p2p_policy.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

using loom::device::P2pEndpoint;
using loom::device::P2pPolicy;

P2pPolicy combine(std::vector<P2pPolicy> p) { return loom::device::combineP2pPolicies(p); }

TEST(P2pPolicy, AnyOffWinsAndOnlyAllForcedForces) {
  EXPECT_EQ(combine({P2pPolicy::Auto, P2pPolicy::Auto}), P2pPolicy::Auto);
  EXPECT_EQ(combine({P2pPolicy::Forced, P2pPolicy::Forced}), P2pPolicy::Forced);
  EXPECT_EQ(combine({P2pPolicy::Forced, P2pPolicy::Auto}), P2pPolicy::Auto);
  EXPECT_EQ(combine({P2pPolicy::Forced, P2pPolicy::Off, P2pPolicy::Forced}), P2pPolicy::Off);
  EXPECT_EQ(combine({P2pPolicy::Forced}), P2pPolicy::Forced);
}

TEST(P2pPolicy, RequiredForcesAndIsSeenByEveryRank) {
  EXPECT_EQ(combine({P2pPolicy::Required, P2pPolicy::Forced}), P2pPolicy::Forced);
  EXPECT_EQ(combine({P2pPolicy::Required, P2pPolicy::Required}), P2pPolicy::Forced);
  EXPECT_EQ(combine({P2pPolicy::Required, P2pPolicy::Auto}), P2pPolicy::Auto);
  EXPECT_EQ(combine({P2pPolicy::Required, P2pPolicy::Off}), P2pPolicy::Off);
  const std::vector<P2pPolicy> one{P2pPolicy::Auto, P2pPolicy::Required}, none{P2pPolicy::Auto, P2pPolicy::Forced};
  EXPECT_TRUE(loom::device::p2pRequired(one));
  EXPECT_FALSE(loom::device::p2pRequired(none));
}

TEST(P2pPolicy, DifferentGpusOfOneHostAreServed) {
  const P2pEndpoint a{7, "0000:18:00.0"}, b{7, "0000:2a:00.0"};
  EXPECT_EQ(loom::device::p2pPairRefusal(a, 0, b, 1, P2pPolicy::Auto), "");
  EXPECT_EQ(loom::device::p2pPairRefusal(a, 0, b, 1, P2pPolicy::Forced), "");
}

TEST(P2pPolicy, SharedGpuOnlyWhenForced) {
  const P2pEndpoint a{7, "0000:18:00.0"}, b{7, "0000:18:00.0"};
  const std::string why = loom::device::p2pPairRefusal(a, 2, b, 5, P2pPolicy::Auto);
  EXPECT_NE(why.find("ranks 2 and 5 share GPU 0000:18:00.0"), std::string::npos) << why;
  EXPECT_NE(why.find("LOOM_DEVICE_PLANS=1"), std::string::npos) << why;
  EXPECT_EQ(loom::device::p2pPairRefusal(a, 2, b, 5, P2pPolicy::Forced), "");
}

TEST(P2pPolicy, OtherHostsAndOffAreRefused) {
  const P2pEndpoint a{7, "0000:18:00.0"}, b{8, "0000:2a:00.0"};
  EXPECT_NE(loom::device::p2pPairRefusal(a, 0, b, 3, P2pPolicy::Forced).find("ranks 0 and 3 are on different hosts"),
            std::string::npos);
  const P2pEndpoint c{7, "0000:2a:00.0"};
  EXPECT_NE(loom::device::p2pPairRefusal(a, 0, c, 1, P2pPolicy::Off), "");
}

// Ranks on different hosts run plan kernels against each other through network lanes, when both have
// them; the same-host rules still hold for the pairs on one host.
TEST(P2pPolicy, OtherHostsThroughNetworkLanes) {
  const P2pEndpoint a{7, "0000:18:00.0", true}, b{8, "0000:18:00.0", true}, bare{8, "0000:2a:00.0", false};
  EXPECT_EQ(loom::device::p2pPairRefusal(a, 0, b, 3, P2pPolicy::Auto), "");
  const std::string why = loom::device::p2pPairRefusal(a, 0, bare, 3, P2pPolicy::Auto);
  EXPECT_NE(why.find("rank 3 has no network lanes"), std::string::npos) << why;
  const P2pEndpoint sameGpu{7, "0000:18:00.0", true};
  EXPECT_NE(loom::device::p2pPairRefusal(a, 0, sameGpu, 1, P2pPolicy::Auto), "");
}

TEST(P2pPolicy, ReadFromTheEnvironment) {
  const std::pair<const char*, P2pPolicy> cases[] = {
      {"0", P2pPolicy::Off}, {"off", P2pPolicy::Off},   {"1", P2pPolicy::Forced},
      {"on", P2pPolicy::Forced}, {"auto", P2pPolicy::Auto}, {"", P2pPolicy::Auto},
      {"require", P2pPolicy::Required}, {"required", P2pPolicy::Required}, {"bogus", P2pPolicy::Auto}};
  for (auto [text, want] : cases) {
    setenv("LOOM_DEVICE_PLANS", text, 1);
    EXPECT_EQ(loom::device::p2pPolicyFromEnvironment(), want) << "'" << text << "'";
  }
  unsetenv("LOOM_DEVICE_PLANS");
  EXPECT_EQ(loom::device::p2pPolicyFromEnvironment(), P2pPolicy::Auto);
}

}  // namespace

namespace setup {

using loom::device::P2pFacts;

P2pFacts rank(uint64_t host, const char* bus, P2pPolicy policy = P2pPolicy::Auto, uint32_t resident = 132) {
  P2pFacts f;
  f.hostHash = host;
  f.policy = static_cast<int32_t>(policy);
  f.ok = 1;
  f.residentBlocks = resident;
  f.nchannels = 32;
  f.nslots = 4;
  f.slotBytes = 128 << 10;
  std::snprintf(f.busId, sizeof f.busId, "%s", bus);
  return f;
}

std::string refusal(std::vector<P2pFacts> facts) { return loom::device::p2pSetupRefusal(facts); }

// The verdict comes from the first round's facts alone, before any rank allocates: every rank reaches
// the same one, and a refused setup leaves nothing to free inside the operation.
TEST(P2pSetup, DifferentGpusOfOneHostAreAccepted) {
  EXPECT_EQ(refusal({rank(7, "0000:18:00.0"), rank(7, "0000:2a:00.0"), rank(7, "0000:3b:00.0")}), "");
}

TEST(P2pSetup, TheRankThatTurnedItOffIsNamed) {
  const std::string why = refusal({rank(7, "0000:18:00.0"), rank(7, "0000:2a:00.0", P2pPolicy::Off)});
  EXPECT_EQ(why, "rank 1 has LOOM_DEVICE_PLANS=0");
}

TEST(P2pSetup, AFailedLocalQueryIsEveryonesReason) {
  std::vector<P2pFacts> facts{rank(7, "0000:18:00.0"), rank(7, "0000:2a:00.0")};
  facts[1].ok = 0;
  std::snprintf(facts[1].why, sizeof facts[1].why, "rank 1: plan kernel occupancy: cudaErrorNoKernelImageForDevice");
  EXPECT_EQ(refusal(facts), "rank 1: plan kernel occupancy: cudaErrorNoKernelImageForDevice");
}

TEST(P2pSetup, FifoLayoutsMustAgree) {
  std::vector<P2pFacts> facts{rank(7, "0000:18:00.0"), rank(7, "0000:2a:00.0")};
  facts[1].nchannels = 16;
  EXPECT_NE(refusal(facts).find("ranks 0 and 1 lay out their FIFOs differently (32 and 16 channels"), std::string::npos);
}

TEST(P2pSetup, SharedGpusNeedEveryRankToForceOrRequire) {
  const char* gpu = "0000:18:00.0";
  EXPECT_NE(refusal({rank(7, gpu), rank(7, gpu)}).find("share GPU"), std::string::npos);
  EXPECT_NE(refusal({rank(7, gpu, P2pPolicy::Forced), rank(7, gpu)}).find("share GPU"), std::string::npos);
  EXPECT_EQ(refusal({rank(7, gpu, P2pPolicy::Forced), rank(7, gpu, P2pPolicy::Required)}), "");
  EXPECT_NE(refusal({rank(7, gpu), rank(8, gpu)}).find("different hosts"), std::string::npos);
}

TEST(P2pSetup, EachRanksShareOfItsGpu) {
  // Two ranks on a 132-block GPU, one alone on a 114-block GPU: the fewest per rank is 66.
  EXPECT_EQ(loom::device::p2pResidentShare(std::vector<P2pFacts>{
                rank(7, "0000:18:00.0", P2pPolicy::Forced, 132), rank(7, "0000:18:00.0", P2pPolicy::Forced, 132),
                rank(7, "0000:2a:00.0", P2pPolicy::Forced, 114)}),
            66u);
  // The same bus id on another host is another GPU.
  EXPECT_EQ(loom::device::p2pResidentShare(std::vector<P2pFacts>{rank(7, "0000:18:00.0"), rank(8, "0000:18:00.0")}),
            132u);
  EXPECT_EQ(loom::device::p2pResidentShare(std::vector<P2pFacts>{rank(7, "0000:18:00.0", P2pPolicy::Auto, 0)}), 1u);
}

}  // namespace setup
