// Which ranks the p2p transport serves (src/transport/p2p_policy.h): every rank decides from the same
// offers, so these pure rules are what keeps the ranks of a communicator on one path.
#include "transport/p2p_policy.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

namespace {

using loom::P2pEndpoint;
using loom::P2pPolicy;

P2pPolicy combine(std::vector<P2pPolicy> p) { return loom::combineP2pPolicies(p); }

TEST(P2pPolicy, AnyOffWinsAndOnlyAllForcedForces) {
  EXPECT_EQ(combine({P2pPolicy::Auto, P2pPolicy::Auto}), P2pPolicy::Auto);
  EXPECT_EQ(combine({P2pPolicy::Forced, P2pPolicy::Forced}), P2pPolicy::Forced);
  EXPECT_EQ(combine({P2pPolicy::Forced, P2pPolicy::Auto}), P2pPolicy::Auto);
  EXPECT_EQ(combine({P2pPolicy::Forced, P2pPolicy::Off, P2pPolicy::Forced}), P2pPolicy::Off);
  EXPECT_EQ(combine({P2pPolicy::Forced}), P2pPolicy::Forced);
}

TEST(P2pPolicy, DifferentGpusOfOneHostAreServed) {
  const P2pEndpoint a{7, "0000:18:00.0"}, b{7, "0000:2a:00.0"};
  EXPECT_EQ(loom::p2pPairRefusal(a, 0, b, 1, P2pPolicy::Auto), "");
  EXPECT_EQ(loom::p2pPairRefusal(a, 0, b, 1, P2pPolicy::Forced), "");
}

TEST(P2pPolicy, SharedGpuOnlyWhenForced) {
  const P2pEndpoint a{7, "0000:18:00.0"}, b{7, "0000:18:00.0"};
  const std::string why = loom::p2pPairRefusal(a, 2, b, 5, P2pPolicy::Auto);
  EXPECT_NE(why.find("ranks 2 and 5 share GPU 0000:18:00.0"), std::string::npos) << why;
  EXPECT_NE(why.find("LOOM_DEVICE_PLANS=1"), std::string::npos) << why;
  EXPECT_EQ(loom::p2pPairRefusal(a, 2, b, 5, P2pPolicy::Forced), "");
}

TEST(P2pPolicy, OtherHostsAndOffAreRefused) {
  const P2pEndpoint a{7, "0000:18:00.0"}, b{8, "0000:2a:00.0"};
  EXPECT_NE(loom::p2pPairRefusal(a, 0, b, 3, P2pPolicy::Forced).find("ranks 0 and 3 are on different hosts"),
            std::string::npos);
  const P2pEndpoint c{7, "0000:2a:00.0"};
  EXPECT_NE(loom::p2pPairRefusal(a, 0, c, 1, P2pPolicy::Off), "");
}

TEST(P2pPolicy, ReadFromTheEnvironment) {
  const std::pair<const char*, P2pPolicy> cases[] = {
      {"0", P2pPolicy::Off}, {"off", P2pPolicy::Off},   {"1", P2pPolicy::Forced},
      {"on", P2pPolicy::Forced}, {"auto", P2pPolicy::Auto}, {"", P2pPolicy::Auto}};
  for (auto [text, want] : cases) {
    setenv("LOOM_DEVICE_PLANS", text, 1);
    EXPECT_EQ(loom::p2pPolicyFromEnvironment(), want) << "'" << text << "'";
  }
  unsetenv("LOOM_DEVICE_PLANS");
  EXPECT_EQ(loom::p2pPolicyFromEnvironment(), P2pPolicy::Auto);
}

}  // namespace
