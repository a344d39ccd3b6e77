// The bootstrap's cost model through loomModelPredictInit (include/loom_model.h): its shape (a tree of
// fanout 8, bytes that grow with the job, sockets that do not), its constants, and clear errors. That
// its bytes and sockets are the protocol's own is held against the load generator's counts
// (perf/bootstrap_scale, the bound test runs it with --model-within).
#include <gtest/gtest.h>

#include <string>

#include "loom_model.h"

namespace {

loomModelInitPrediction_t predict(int ranks, int perNode = 8, const char* constants = nullptr, size_t gatherBytes = 8) {
  loomModelInitRequest_t r = LOOM_MODEL_INIT_REQUEST_INITIALIZER;
  r.ranks = ranks;
  r.ranksPerNode = perNode;
  r.constants = constants;
  r.gatherBytes = gatherBytes;
  loomModelInitPrediction_t p{};
  EXPECT_EQ(loomModelPredictInit(&r, &p), loomSuccess) << loomGetLastError(nullptr);
  return p;
}

TEST(InitModel, TheTreeOfLeadersIsShallow) {
  EXPECT_EQ(predict(8).hosts, 1);
  EXPECT_EQ(predict(8).depth, 0);
  EXPECT_EQ(predict(72).depth, 1);  // 9 hosts: host 0 and its 8 children
  EXPECT_EQ(predict(80).depth, 2);  // a 10th host hangs below host 1
  const loomModelInitPrediction_t big = predict(131072);
  EXPECT_EQ(big.hosts, 16384);
  EXPECT_EQ(big.depth, 5);  // 1 + 8 + 64 + 512 + 4096 hosts within 4 hops; 16384 within 5
}

TEST(InitModel, BytesGrowWithTheJobAndSocketsDoNot) {
  const loomModelInitPrediction_t small = predict(4096), large = predict(65536);
  EXPECT_NEAR(large.busiestBytes / small.busiestBytes, 16.0, 1.0);  // O(n) per party, not O(n^2)
  EXPECT_EQ(large.busiestSockets, small.busiestSockets);
  EXPECT_LE(large.busiestSockets, 80);
  EXPECT_GT(large.totalUs, small.totalUs);
  EXPECT_NEAR(large.totalUs, large.tableUs + large.gatherUs + large.barrierUs, 1e-6 * large.totalUs);
  // The table: 32 bytes a rank and about 100 a host.
  EXPECT_GT(large.tableBytes, 65536u * 32);
  EXPECT_LT(large.tableBytes, 65536u * 32 + 8192u * 128);
  EXPECT_EQ(predict(65536, 8, nullptr, 0).gatherUs, 0.0);
}

TEST(InitModel, ConstantsAreTheHostsOwn) {
  const double base = predict(16384).totalUs;
  EXPECT_GT(predict(16384, 8, "connection_us=400").totalUs, base);
  EXPECT_LT(predict(16384, 8, "connection_us=4, record_us=0.001").totalUs, base);
  EXPECT_GT(predict(16384, 8, "table_rank_us=1").cpuUs, predict(16384).cpuUs);
}

TEST(InitModel, BadInputIsNamed) {
  auto expectError = [](const loomModelInitRequest_t& r, const char* text) {
    loomModelInitPrediction_t p{};
    EXPECT_EQ(loomModelPredictInit(&r, &p), loomInvalidArgument);
    EXPECT_NE(std::string(loomGetLastError(nullptr)).find(text), std::string::npos) << loomGetLastError(nullptr);
  };
  loomModelInitRequest_t r = LOOM_MODEL_INIT_REQUEST_INITIALIZER;
  r.ranks = 0;
  expectError(r, "0 ranks");
  r = LOOM_MODEL_INIT_REQUEST_INITIALIZER;
  r.ranksPerNode = 0;
  expectError(r, "0 ranks per node");
  r = LOOM_MODEL_INIT_REQUEST_INITIALIZER;
  r.netGbs = 0;
  expectError(r, "rate 0 GB/s");
  r = LOOM_MODEL_INIT_REQUEST_INITIALIZER;
  r.constants = "joins_us=3";
  expectError(r, "'joins_us' is not one of");
  r.constants = "join_us=fast";
  expectError(r, "join_us='fast' is not a non-negative number");
  r.constants = "join_us=-1";
  expectError(r, "not a non-negative number");
  expectError(r, "loomModelPredictInit");
  loomModelInitPrediction_t p{};
  EXPECT_EQ(loomModelPredictInit(nullptr, &p), loomInvalidArgument);
}

}  // namespace
