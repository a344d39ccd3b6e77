// The plan kernel's channel count (src/device/channels.h): the tuner's, stopped at the transport's
// channels and at the lane budget, counting the lanes of the busiest rank.
#include "device/channels.h"

#include <gtest/gtest.h>

namespace loom::device {
namespace {

PlanRequest request(Collective coll, int nranks, uint64_t count, int root = 0) {
  return PlanRequest{.coll = coll, .nranks = nranks, .root = root, .count = count, .elemSize = 4, .chunkElems = 65536};
}

TEST(DeviceChannels, TheTunersUpToTheTransportsChannels) {
  const DeviceChannelLimits limits{32, 1000};
  EXPECT_EQ(deviceChannels(0, 1, limits), 1);
  EXPECT_EQ(deviceChannels(1, 1, limits), 1);
  EXPECT_EQ(deviceChannels(16, 1, limits), 16);
  EXPECT_EQ(deviceChannels(32, 1, limits), 32);
  EXPECT_EQ(deviceChannels(64, 1, limits), 32);
  EXPECT_EQ(deviceChannels(32, 1, DeviceChannelLimits{0, 1000}), 1);  // a bad limit still gives 1
}

TEST(DeviceChannels, StayWithinTheLaneBudget) {
  EXPECT_EQ(deviceChannels(32, 1, DeviceChannelLimits{32, 33}), 32);
  EXPECT_EQ(deviceChannels(32, 1, DeviceChannelLimits{32, 20}), 20);
  EXPECT_EQ(deviceChannels(32, 15, DeviceChannelLimits{32, 66}), 4);  // 8-rank direct all-to-all
  EXPECT_EQ(deviceChannels(32, 15, DeviceChannelLimits{32, 10}), 1);  // does not fit: the launch says so
}

TEST(DeviceChannels, LanesOfTheBusiestRank) {
  uint64_t lanes = 0;
  ASSERT_TRUE(maxLanesPerChannel(Algorithm::Ring, request(Collective::AllReduce, 8, 1 << 20), &lanes).ok());
  EXPECT_EQ(lanes, 1u);
  // A direct broadcast: the root sends to every peer on its own lane, the others receive on one.
  ASSERT_TRUE(maxLanesPerChannel(Algorithm::Direct, request(Collective::Broadcast, 8, 1 << 20, 5), &lanes).ok());
  EXPECT_EQ(lanes, 8u);
  ASSERT_TRUE(maxLanesPerChannel(Algorithm::Direct, request(Collective::AlltoAll, 4, 1 << 20), &lanes).ok());
  EXPECT_EQ(lanes, 7u);
  // Independent of the count (a tiny one still counts every lane) and of the request's channels.
  PlanRequest tiny = request(Collective::AllGather, 4, 1);
  tiny.nchannels = 4;
  ASSERT_TRUE(maxLanesPerChannel(Algorithm::Direct, tiny, &lanes).ok());
  EXPECT_EQ(lanes, 7u);
  PlanRequest oneShot = request(Collective::AllReduce, 4, 100);
  ASSERT_TRUE(maxLanesPerChannel(Algorithm::OneShot, oneShot, &lanes).ok());
  EXPECT_GE(lanes, 1u);
  // A shape the builder refuses is an error, not a count.
  EXPECT_FALSE(maxLanesPerChannel(Algorithm::Tree, request(Collective::AllGather, 4, 100), &lanes).ok());
}

}  // namespace
}  // namespace loom::device
