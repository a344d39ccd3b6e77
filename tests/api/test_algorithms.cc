// Every algorithm forced with LOOM_ALGO (ring, tree, direct, oneshot, hier with nodes emulated by
// LOOM_RANKS_PER_NODE) executed for real and checked element by element, over each transport (the
// library also proves the small plans with the verifier before they run; LOOM_VERIFY=1 for all would
// take minutes here). Small chunks (LOOM_CHUNK_BYTES) make the pipelined algorithms run many chunks. A trace confirms that the forced
// algorithm is the one that ran, not a fallback.
//
// Thread ranks (local and socket transports) or, with LOOM_TEST_LAUNCH=processes, process ranks (shm
// and socket): launch_config.h.
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <unistd.h>

#include "launch_config.h"
#include "matrix_test.h"

namespace loomtest {
namespace {

struct AlgoParam {
  const char* algo;
  const char* transport;  // "" = default for the launch
  int nranks;
  int ranksPerNode;       // LOOM_RANKS_PER_NODE; 0 = unset
  const char* chunkBytes; // LOOM_CHUNK_BYTES; nullptr = unset
};

// The collectives each algorithm has plans for (the tuner replaces a forced algorithm elsewhere).
std::vector<Coll> collsOf(const std::string& algo) {
  if (algo == "tree") return {Coll::AllReduce, Coll::Broadcast, Coll::Reduce};
  if (algo == "oneshot" || algo == "hier") return {Coll::AllReduce};
  if (algo == "ring") return {Coll::AllReduce, Coll::Broadcast, Coll::Reduce, Coll::AllGather, Coll::ReduceScatter};
  return {Coll::AllReduce, Coll::Broadcast, Coll::Reduce, Coll::AllGather, Coll::ReduceScatter,
          Coll::AlltoAll,  Coll::Gather,    Coll::Scatter};
}

class ForcedAlgorithm : public ::testing::TestWithParam<AlgoParam> {
 protected:
  void SetUp() override {
    const AlgoParam& p = GetParam();
    algo_.emplace("LOOM_ALGO", p.algo);
    rpn_.emplace("LOOM_RANKS_PER_NODE", p.ranksPerNode ? std::to_string(p.ranksPerNode).c_str() : nullptr);
    chunk_.emplace("LOOM_CHUNK_BYTES", p.chunkBytes);
  }
  void TearDown() override {
    chunk_.reset();
    rpn_.reset();
    algo_.reset();
  }

 private:
  std::optional<ScopedEnv> algo_, rpn_, chunk_;
};

// Every dtype and op appears (pairs rotating); every count, in and out of place; roots rotate.
TEST_P(ForcedAlgorithm, ResultsAreRight) {
  const AlgoParam& p = GetParam();
  MatrixSpec spec{.colls = collsOf(p.algo), .counts = {0, 1, 3, 1000, 20011}, .crossDtypeOp = false};
  expectMatrixPasses(testLaunch(), p.transport, p.nranks, spec);
}

// The trace names the plan that ran ("... via tree"); a silent fallback to another algorithm fails.
TEST_P(ForcedAlgorithm, ForcedAlgorithmRuns) {
  const AlgoParam& p = GetParam();
  if (p.nranks == 1) GTEST_SKIP() << "one rank moves nothing: any algorithm gives the same copy";
  const std::string pattern = ::testing::TempDir() + "loom-algo-" + std::to_string(getpid()) + "-%r.json";
  ScopedEnv trace("LOOM_TRACE_FILE", pattern.c_str());
  RunOptions options;
  options.transport = p.transport;
  std::string failures = runRanks(testLaunch(), p.nranks, options, [](RankContext& ctx) -> std::string {
    std::vector<float> data(100, 1.0f);
    LT_CALL(ctx.comm, loomAllReduce(data.data(), data.data(), data.size(), loomFloat32, loomSum, ctx.comm, nullptr));
    return "";
  });
  ASSERT_TRUE(failures.empty()) << failures;
  for (int r = 0; r < p.nranks; ++r) {
    std::string path = pattern;
    path.replace(path.find("%r"), 2, std::to_string(r));
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_NE(text.str().find(std::string("via ") + p.algo), std::string::npos)
        << "rank " << r << "'s trace " << path << " has no AllReduce via " << p.algo << ":\n"
        << text.str().substr(0, 2000);
    std::remove(path.c_str());
  }
}

std::vector<AlgoParam> algorithmParams() {
  // Rank counts: 1, a pair, odd ones (uneven trees and splits) and a power of two; fewer over the
  // slower launches to keep the run short.
  const std::vector<std::pair<const char*, std::vector<int>>> transports =
      testLaunch() == Launch::Processes
          ? std::vector<std::pair<const char*, std::vector<int>>>{{"shm", {2, 3, 5}}, {"socket", {3}}}
          : std::vector<std::pair<const char*, std::vector<int>>>{{"", {1, 2, 3, 5, 8}}, {"socket", {2, 5}}};
  std::vector<AlgoParam> v;
  for (const auto& [t, ranks] : transports) {
    for (const char* algo : {"ring", "tree", "direct", "oneshot"})
      for (int n : ranks) v.push_back({algo, t, n, 0, "4096"});
    // Hierarchical: 2 and 3 ranks per emulated node; 4096 B chunks pipeline the inter-node rings.
    v.push_back({"hier", t, 4, 2, "4096"});
    v.push_back({"hier", t, 6, 3, "4096"});
    v.push_back({"hier", t, 6, 2, nullptr});
  }
  return v;
}

std::string algorithmParamName(const ::testing::TestParamInfo<AlgoParam>& info) {
  const AlgoParam& p = info.param;
  std::string name = std::string(p.algo) + "_" + (*p.transport ? p.transport : "default") + "_n" +
                     std::to_string(p.nranks);
  if (p.ranksPerNode) name += "_rpn" + std::to_string(p.ranksPerNode);
  if (!p.chunkBytes) name += "_slot";
  return name;
}

INSTANTIATE_TEST_SUITE_P(Algorithms, ForcedAlgorithm, ::testing::ValuesIn(algorithmParams()), algorithmParamName);

}  // namespace
}  // namespace loomtest
