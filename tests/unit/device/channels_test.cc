// The plan kernel's channel count (src/device/channels.h): grows with the bytes, stops at
// the transport's channels and at the lane budget, and counts the lanes of the busiest rank.
#include "device/channels.h"

#include <gtest/gtest.h>

namespace loom::device {
namespace {

PlanRequest request(Collective coll, int nranks, uint64_t count, int root = 0) {
  return PlanRequest{.coll = coll, .nranks = nranks, .root = root, .count = count, .elemSize = 4, .chunkElems = 65536};
}

TEST(DeviceChannels, GrowWithTheBytesUpToTheTransportsChannels) {
  const DeviceChannelLimits limits{32, 1000};
  EXPECT_EQ(deviceChannels(0, 1, limits), 1);
  EXPECT_EQ(deviceChannels(8, 1, limits), 1);
  EXPECT_EQ(deviceChannels(kDeviceBytesPerChannel * 2 - 1, 1, limits), 1);
  EXPECT_EQ(deviceChannels(kDeviceBytesPerChannel * 2, 1, limits), 2);
  EXPECT_EQ(deviceChannels(uint64_t{8} << 20, 1, limits), 16);
  EXPECT_EQ(deviceChannels(uint64_t{1} << 30, 1, limits), 32);
  EXPECT_EQ(deviceChannels(uint64_t{1} << 30, 1, DeviceChannelLimits{0, 1000}), 1);  // a bad limit still gives 1
}

TEST(DeviceChannels, StayWithinTheLaneBudget) {
  EXPECT_EQ(deviceChannels(uint64_t{1} << 30, 1, DeviceChannelLimits{32, 33}), 32);
  EXPECT_EQ(deviceChannels(uint64_t{1} << 30, 1, DeviceChannelLimits{32, 20}), 20);
  EXPECT_EQ(deviceChannels(uint64_t{1} << 30, 15, DeviceChannelLimits{32, 66}), 4);  // 8-rank direct all-to-all
  EXPECT_EQ(deviceChannels(uint64_t{1} << 30, 15, DeviceChannelLimits{32, 10}), 1);  // does not fit: the launch says so
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

TEST(DeviceChannels, OperationBytesAreTheLargerBuffer) {
  EXPECT_EQ(deviceOperationBytes(request(Collective::AllReduce, 4, 1000)), 4000u);
  EXPECT_EQ(deviceOperationBytes(request(Collective::AllGather, 4, 1000)), 16000u);
  EXPECT_EQ(deviceOperationBytes(request(Collective::ReduceScatter, 4, 1000)), 16000u);
  EXPECT_EQ(deviceOperationBytes(request(Collective::Gather, 4, 1000, 2)), 16000u);  // the root's
}

// Every rank must split an operation over the same channels: what it asks cannot depend on its rank.
TEST(DeviceChannels, OperationBytesAreTheSameOnEveryRank) {
  for (Collective coll : {Collective::AllReduce, Collective::Broadcast, Collective::Reduce, Collective::AllGather,
                          Collective::ReduceScatter, Collective::AlltoAll, Collective::Gather, Collective::Scatter})
    for (int root : {0, 3}) {
      PlanRequest req = request(coll, 5, 1 << 20, root);
      const uint64_t atRoot = deviceOperationBytes(req);
      for (int r = 0; r < 5; ++r) {
        req.rank = r;
        EXPECT_EQ(deviceOperationBytes(req), atRoot) << collectiveName(coll) << " root " << root << " rank " << r;
      }
    }
}

}  // namespace
}  // namespace loom::device
