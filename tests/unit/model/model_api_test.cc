// include/loom_model.h as a user calls it: a modelled machine without a topology, groups and placement,
// point-to-point transfers, the machine it reports, and clear errors for bad input.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "loom_model.h"

namespace {

struct Model {
  loomModel_t handle = nullptr;
  ~Model() { loomModelDestroy(handle); }
};

loomResult_t create(Model* m, int world, int perNode, const char* machine, const char* topology = "none") {
  loomModelConfig_t c = LOOM_MODEL_CONFIG_INITIALIZER;
  c.world = world;
  c.ranksPerNode = perNode;
  c.topology = topology;
  c.machine = machine;
  return loomModelCreate(&c, &m->handle);
}

double allReduceUs(loomModel_t model, size_t bytes, std::vector<int> ranks = {}, bool concurrent = true) {
  loomModelRequest_t req = LOOM_MODEL_REQUEST_INITIALIZER;
  req.bytes = bytes;
  req.ranks = ranks.empty() ? nullptr : ranks.data();
  req.nranks = static_cast<int>(ranks.size());
  req.concurrent = concurrent;
  loomModelPrediction_t out;
  EXPECT_EQ(loomModelPredict(model, &req, &out), loomSuccess) << loomGetLastError(nullptr);
  return out.timeUs;
}

TEST(ModelApi, FasterFabricIsFaster) {
  Model fast, slow;
  ASSERT_EQ(create(&fast, 8, 0, "intra_gbs=100"), loomSuccess) << loomGetLastError(nullptr);
  ASSERT_EQ(create(&slow, 8, 0, "intra_gbs=10"), loomSuccess);
  EXPECT_LT(allReduceUs(fast.handle, 64 << 20), allReduceUs(slow.handle, 64 << 20));
  EXPECT_EQ(allReduceUs(slow.handle, 64 << 20, {3}), 0.0);  // one rank moves nothing
  EXPECT_STREQ(loomModelSource(fast.handle), "none");
  loomModelMachine_t m;
  ASSERT_EQ(loomModelGetMachine(fast.handle, nullptr, 0, 1, &m), loomSuccess);
  EXPECT_EQ(m.nranks, 8);
  EXPECT_EQ(m.intraGbs, 100);
  EXPECT_TRUE(m.device);
  EXPECT_EQ(m.launchUs, 0);  // no topology: the fields given alone
  Model launched;
  ASSERT_EQ(create(&launched, 8, 0, "intra_gbs=100,launch_us=10"), loomSuccess);
  EXPECT_NEAR(allReduceUs(launched.handle, 8), allReduceUs(fast.handle, 8) + 10, 1e-9);
}

TEST(ModelApi, PredictionReportsTheChoice) {
  Model m;
  ASSERT_EQ(create(&m, 8, 0, ""), loomSuccess);
  loomModelRequest_t req = LOOM_MODEL_REQUEST_INITIALIZER;
  req.collective = loomModelAllGather;
  req.bytes = 8 << 20;
  loomModelPrediction_t out;
  ASSERT_EQ(loomModelPredict(m.handle, &req, &out), loomSuccess);
  EXPECT_EQ(out.count, (8u << 20) / 4 / 8);  // nccl-tests' size: every rank's block
  EXPECT_EQ(out.bytes, 8u << 20);
  req.bytes = (8u << 20) + 31;  // not a whole element of every rank's block: the size rounds down
  ASSERT_EQ(loomModelPredict(m.handle, &req, &out), loomSuccess);
  EXPECT_EQ(out.bytes, 8u << 20);
  req.bytes = 8u << 20;
  EXPECT_GT(out.channels, 0);
  EXPECT_NEAR(out.busbwGbs, out.algbwGbs * 7 / 8, 1e-9);
  EXPECT_STRNE(out.algorithm, "none");
  req.algorithm = "tree";  // tree does not serve all_gather: the tuned choice, with a note
  ASSERT_EQ(loomModelPredict(m.handle, &req, &out), loomSuccess);
  EXPECT_NE(std::string(out.note).find("tree"), std::string::npos) << out.note;
}

TEST(ModelApi, NodesAndNicsMatter) {
  Model m;
  ASSERT_EQ(create(&m, 16, 8, "nic_gbs=5"), loomSuccess);
  const double inside = allReduceUs(m.handle, 64 << 20, {0, 1});
  const double across = allReduceUs(m.handle, 64 << 20, {0, 8}, false);
  const double shared = allReduceUs(m.handle, 64 << 20, {0, 8});  // 8 such pairs share the NIC
  EXPECT_LT(inside, across);
  EXPECT_LT(across, shared);
  int srcs[] = {0}, near[] = {1}, far[] = {8};
  double nearUs = 0, farUs = 0;
  ASSERT_EQ(loomModelPointToPoint(m.handle, 16 << 20, srcs, near, 1, 4, 1, &nearUs), loomSuccess);
  ASSERT_EQ(loomModelPointToPoint(m.handle, 16 << 20, srcs, far, 1, 4, 1, &farUs), loomSuccess);
  EXPECT_GT(farUs, nearUs);
  EXPECT_GT(nearUs, 0);
}

TEST(ModelApi, BadInputIsNamed) {
  Model m;
  auto expectError = [](loomResult_t r, const char* text) {
    EXPECT_EQ(r, loomInvalidArgument);
    EXPECT_NE(std::string(loomGetLastError(nullptr)).find(text), std::string::npos) << loomGetLastError(nullptr);
  };
  expectError(create(&m, 8, 0, "intra_gb=3"), "unknown machine field 'intra_gb'");
  expectError(create(&m, 8, 0, "nic_gbs=fast"), "not a number");
  expectError(create(&m, 8, 0, "nic_gbs=0"), "must be positive");
  expectError(create(&m, 0, 0, ""), "world 0");
  expectError(create(&m, 8, 3, ""), "do not divide");
  expectError(create(&m, 8, 0, "", "/nonexistent/topology.xml"), "topology");
  loomModelConfig_t c = LOOM_MODEL_CONFIG_INITIALIZER;
  c.size = 8;
  expectError(loomModelCreate(&c, &m.handle), "LOOM_MODEL_CONFIG_INITIALIZER");
  c = LOOM_MODEL_CONFIG_INITIALIZER;
  c.topology = "none";
  c.nvswitchGbs = 240;
  expectError(loomModelCreate(&c, &m.handle), "needs a topology");
  EXPECT_EQ(m.handle, nullptr);

  ASSERT_EQ(create(&m, 16, 8, ""), loomSuccess);
  loomModelRequest_t req = LOOM_MODEL_REQUEST_INITIALIZER;
  loomModelPrediction_t out;
  req.bytes = 1024;
  int outside[] = {0, 16};
  req.ranks = outside;
  req.nranks = 2;
  expectError(loomModelPredict(m.handle, &req, &out), "outside the job");
  int uneven[] = {0, 1, 8};
  req.ranks = uneven;
  req.nranks = 3;
  expectError(loomModelPredict(m.handle, &req, &out), "ranks on node");
  req = LOOM_MODEL_REQUEST_INITIALIZER;
  req.algorithm = "fastest";
  expectError(loomModelPredict(m.handle, &req, &out), "unknown algorithm 'fastest'");
  req = LOOM_MODEL_REQUEST_INITIALIZER;
  req.collective = static_cast<loomModelCollective_t>(42);
  expectError(loomModelPredict(m.handle, &req, &out), "unknown collective");
  req = LOOM_MODEL_REQUEST_INITIALIZER;
  req.collective = loomModelBroadcast;
  req.root = 16;
  expectError(loomModelPredict(m.handle, &req, &out), "root 16");
  int self[] = {3};
  double us = 0;
  expectError(loomModelPointToPoint(m.handle, 8, self, self, 1, 4, 1, &us), "sends to itself");
  expectError(loomModelPredict(nullptr, &req, &out), "NULL");
}

TEST(ModelApi, AddedNvSwitchJoinsAPciOnlyFile) {
  const char* dir = std::getenv("LOOM_FIXTURES");
  const std::string ndv4 = dir ? std::string(dir) + "/nccl-azure-ndv4-topo.xml" : "";
  const std::string hgx = dir ? std::string(dir) + "/nccl-hgx-8xA100-nvswitch-4xcx6.xml" : "";
  if (!dir) GTEST_SKIP() << "LOOM_FIXTURES is not set";
  if (FILE* f = std::fopen(ndv4.c_str(), "r")) std::fclose(f);
  else GTEST_SKIP() << ndv4 << " not found";
  loomModelConfig_t c = LOOM_MODEL_CONFIG_INITIALIZER;
  c.world = 8;
  c.topology = ndv4.c_str();
  Model pci, joined, twice;
  ASSERT_EQ(loomModelCreate(&c, &pci.handle), loomSuccess) << loomGetLastError(nullptr);
  c.nvswitchGbs = 240;
  ASSERT_EQ(loomModelCreate(&c, &joined.handle), loomSuccess) << loomGetLastError(nullptr);
  loomModelMachine_t a, b;
  ASSERT_EQ(loomModelGetMachine(pci.handle, nullptr, 0, 1, &a), loomSuccess);
  ASSERT_EQ(loomModelGetMachine(joined.handle, nullptr, 0, 1, &b), loomSuccess);
  EXPECT_LT(a.intraGbs, 100);  // PCIe only
  EXPECT_NEAR(b.intraGbs, 240, 1e-9);
  EXPECT_LT(b.latencyUs, a.latencyUs);  // NVLink's hop, not PCIe's
  EXPECT_GT(b.launchUs, 0);             // GPUs: a kernel launch per operation
  c.topology = hgx.c_str();  // already has its NVSwitch
  EXPECT_EQ(loomModelCreate(&c, &twice.handle), loomInvalidArgument);
  EXPECT_NE(std::string(loomGetLastError(nullptr)).find("already has NVLinks"), std::string::npos);
}

}  // namespace
