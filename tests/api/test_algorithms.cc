// Every algorithm forced with LOOM_ALGO (ring, tree, direct, oneshot, hier with nodes emulated by
// LOOM_RANKS_PER_NODE) executed for real and checked element by element, over each transport (the
// library also proves the small plans with the verifier before they run; LOOM_VERIFY=1 for all would
// take minutes here). Small chunks (LOOM_CHUNK_BYTES) make the pipelined algorithms run many chunks. A trace confirms that the forced
// algorithm is the one that ran, not a fallback.
//
// LOOM_ALGO's rules by collective and size (RuleSelection) run in a live communicator the same way.
//
// Thread ranks (local and socket transports) or, with LOOM_TEST_LAUNCH=processes, process ranks (shm
// and socket): launch_config.h.
#include <cstdio>
#include <fstream>
#include <optional>
#include <regex>
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

// Rank r's trace (LOOM_TRACE_FILE with %r), read and removed.
std::string takeTrace(const std::string& pattern, int rank) {
  std::string path = pattern;
  path.replace(path.find("%r"), 2, std::to_string(rank));
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(path.c_str());
  return text.str();
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
    const std::string text = takeTrace(pattern, r);
    EXPECT_NE(text.find(std::string("via ") + p.algo), std::string::npos)
        << "rank " << r << "'s trace has no AllReduce via " << p.algo << ":\n" << text.substr(0, 2000);
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

// LOOM_ALGO by collective and size (algorithms/algorithm_rules.h): each call runs the algorithm of the
// last rule covering it, sizes being nccl-tests' (every rank's block for allgather); a call no rule
// covers is tuned; a rule whose algorithm cannot serve the call falls back to the tuned choice. The
// trace says which plan ran; the results are checked too.
TEST(RuleSelection, EachCallRunsItsRulesAlgorithm) {
  constexpr int kRanks = 3;
  ScopedEnv rules("LOOM_ALGO", "allreduce:0-1K:oneshot,1K-:direct,broadcast:tree,allgather:0-1K:ring,1K-:direct,"
                               "reducescatter:tree");
  const std::string pattern = ::testing::TempDir() + "loom-rules-" + std::to_string(getpid()) + "-%r.json";
  ScopedEnv trace("LOOM_TRACE_FILE", pattern.c_str());
  std::string failures = runRanks(testLaunch(), kRanks, RunOptions{}, [](RankContext& ctx) -> std::string {
    const float mine = static_cast<float>(ctx.rank + 1);
    const float sum = kRanks * (kRanks + 1) / 2.0f;
    for (size_t count : {100, 1000}) {  // 400 B: oneshot; 4000 B: direct
      std::vector<float> data(count, mine);
      LT_CALL(ctx.comm, loomAllReduce(data.data(), data.data(), count, loomFloat32, loomSum, ctx.comm, nullptr));
      for (float v : data)
        if (v != sum) return "allreduce of " + std::to_string(count) + " gave " + std::to_string(v);
    }
    std::vector<float> bcast(100, mine);
    LT_CALL(ctx.comm, loomBroadcast(bcast.data(), bcast.data(), bcast.size(), loomFloat32, 0, ctx.comm, nullptr));
    if (bcast[99] != 1.0f) return "broadcast gave " + std::to_string(bcast[99]);
    // 100 floats per rank: 1200 B in nccl-tests' size (direct), though each rank's block is 400 B.
    std::vector<float> block(100, mine), gathered(100 * kRanks, 0);
    LT_CALL(ctx.comm, loomAllGather(block.data(), gathered.data(), block.size(), loomFloat32, ctx.comm, nullptr));
    for (int r = 0; r < kRanks; ++r)
      if (gathered[100 * r] != static_cast<float>(r + 1)) return "allgather's block " + std::to_string(r) + " is wrong";
    // tree has no reduce-scatter: the tuned choice runs it (with a warning).
    std::vector<float> all(100 * kRanks, mine), part(100, 0);
    LT_CALL(ctx.comm, loomReduceScatter(all.data(), part.data(), part.size(), loomFloat32, loomSum, ctx.comm, nullptr));
    if (part[0] != sum) return "reducescatter gave " + std::to_string(part[0]);
    // No rule names reduce: tuned.
    std::vector<float> reduced(100, 0);
    LT_CALL(ctx.comm, loomReduce(block.data(), reduced.data(), block.size(), loomFloat32, loomSum, 0, ctx.comm, nullptr));
    return "";
  });
  ASSERT_TRUE(failures.empty()) << failures;
  for (int r = 0; r < kRanks; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const std::string text = takeTrace(pattern, r);
    auto ran = [&](const char* coll, const char* shape, const char* algo) {
      return std::regex_search(text, std::regex(std::string(coll) + " #[0-9]+ on [^\"]*\\(" + shape + "\\) via " + algo));
    };
    EXPECT_TRUE(ran("AllReduce", "100 x float, sum", "oneshot")) << text.substr(0, 3000);
    EXPECT_TRUE(ran("AllReduce", "1000 x float, sum", "direct")) << text.substr(0, 3000);
    EXPECT_TRUE(ran("Broadcast", "100 x float, root 0", "tree")) << text.substr(0, 3000);
    EXPECT_TRUE(ran("AllGather", "100 x float", "direct")) << text.substr(0, 3000);
    EXPECT_TRUE(ran("ReduceScatter", "100 x float, sum", "[a-z]+")) << text.substr(0, 3000);
    EXPECT_FALSE(ran("ReduceScatter", "100 x float, sum", "tree")) << text.substr(0, 3000);
    EXPECT_TRUE(ran("Reduce", "100 x float, sum, root 0", "[a-z]+")) << text.substr(0, 3000);
  }
}

// A malformed LOOM_ALGO fails init with loomInvalidArgument, the last error naming the setting and the
// piece that is wrong.
TEST(RuleSelection, MalformedRulesFailInit) {
  for (const auto& [value, piece] : {std::pair<const char*, const char*>{"allreduce:0-64K:oneshtt", "oneshtt"},
                                     {"allreduse:ring", "allreduse"},
                                     {"allreduce:64K-1K:ring", "64K-1K"}}) {
    ScopedEnv rules("LOOM_ALGO", value);
    loomComm_t comms[2] = {nullptr, nullptr};
    EXPECT_EQ(loomCommInitAll(comms, 2, nullptr), loomInvalidArgument) << value;
    const std::string error = loomGetLastError(nullptr);
    EXPECT_NE(error.find(std::string("LOOM_ALGO=") + value), std::string::npos) << error;
    EXPECT_NE(error.find(std::string("'") + piece + "'"), std::string::npos) << error;
    for (loomComm_t c : comms) EXPECT_EQ(c, nullptr);
  }
}

}  // namespace
}  // namespace loomtest
