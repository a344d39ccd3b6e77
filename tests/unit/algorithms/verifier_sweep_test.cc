// Ring, direct and tree x every collective they serve, proven by the verifier over ranks 1..64, awkward counts, chunk sizes,
// channel counts, custom ring orderings and every root (a spread of roots past 9 ranks), out of place
// and in place. Large shapes use fewer counts so the suite stays fast. One-shot and hierarchical
// plans, which serve only some shapes, have their own sweeps (one_shot_test.cc, hierarchical_test.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "algorithms/builders.h"
#include "algorithms/verifier.h"

namespace loom {
namespace {

struct SweepCase {
  Algorithm algo;
  Collective coll;
};

std::string caseName(const testing::TestParamInfo<SweepCase>& info) {
  return std::string(algorithmName(info.param.algo)) + "_" + collectiveName(info.param.coll);
}

bool rooted(Collective c) {
  return c == Collective::Broadcast || c == Collective::Reduce || c == Collective::Gather || c == Collective::Scatter;
}

// Collectives whose buffers hold n blocks of count elements; their cost grows with n*count.
bool perRankBlocks(Collective c) {
  return c == Collective::AllGather || c == Collective::ReduceScatter || c == Collective::AlltoAll ||
         c == Collective::Gather || c == Collective::Scatter;
}

std::vector<int> rankCounts() {
  std::vector<int> ranks = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 23, 32, 47, 64};
  return ranks;
}

std::vector<uint64_t> counts(int n, Collective coll) {
  std::set<uint64_t> set = {0, 1, 2, 3, 13, static_cast<uint64_t>(n) + 1};
  if (n > 1) set.insert(n - 1);
  // Big counts where they stay cheap: small rank counts, or collectives whose size is just count.
  const bool small = n <= 9;
  if (small || !perRankBlocks(coll)) set.insert(1009);
  if (n < 32 || !perRankBlocks(coll)) set.insert(97);
  if (small) set.insert(2 * n * 7 + 5);  // not divisible by ranks, channels or chunk
  return {set.begin(), set.end()};
}

std::vector<int> roots(int n, Collective coll) {
  if (!rooted(coll)) return {0};
  if (n <= 9) {
    std::vector<int> all(n);
    std::iota(all.begin(), all.end(), 0);
    return all;
  }
  return {0, 1, n / 2, n - 1};
}

// Ring orderings: none (identity), or shuffled and reversed orders (fewer than channels, so they cycle).
std::vector<std::vector<int>> customRings(int n, int nchannels, uint32_t seed) {
  std::vector<int> shuffled(n);
  std::iota(shuffled.begin(), shuffled.end(), 0);
  std::mt19937 rng(seed);
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  std::vector<int> reversed(n);
  for (int i = 0; i < n; ++i) reversed[i] = n - 1 - i;
  if (nchannels == 1) return {shuffled};
  return {shuffled, reversed};
}

class Sweep : public testing::TestWithParam<SweepCase> {};

TEST_P(Sweep, VerifiesEveryShape) {
  const SweepCase param = GetParam();
  int verified = 0;
  for (int n : rankCounts()) {
    for (uint64_t count : counts(n, param.coll)) {
      for (uint64_t chunk : {uint64_t{1}, uint64_t{3}, uint64_t{64}, uint64_t{1} << 40}) {
        // One-element messages over many ranks and big buffers only multiply steps; keep a few.
        if (chunk == 1 && n > 9 && count > (n < 32 ? 13u : 3u)) continue;
        for (int nchannels : {1, 2, 3}) {
          for (int root : roots(n, param.coll)) {
            PlanRequest req;
            req.coll = param.coll;
            req.nranks = n;
            req.root = root;
            req.count = count;
            req.elemSize = 4;
            req.chunkElems = chunk;
            req.nchannels = nchannels;
            // Identity rings for some shapes, custom orderings for the others.
            if ((count + nchannels) % 2 == 1) req.rings = customRings(n, nchannels, static_cast<uint32_t>(n * 31 + count));
            const Status st = verifyAlgorithm(param.algo, req);
            ASSERT_TRUE(st.ok()) << algorithmName(param.algo) << " " << collectiveName(param.coll) << " n=" << n
                                 << " count=" << count << " chunk=" << chunk << " channels=" << nchannels
                                 << " root=" << root << " rings=" << req.rings.size() << ": " << st.message();
            ++verified;
          }
        }
      }
    }
  }
  RecordProperty("verified", verified);
}

std::vector<SweepCase> sweepCases() {
  std::vector<SweepCase> cases;
  for (Collective coll : {Collective::AllReduce, Collective::Broadcast, Collective::Reduce, Collective::AllGather,
                          Collective::ReduceScatter})
    cases.push_back({Algorithm::Ring, coll});
  for (Collective coll : {Collective::AllReduce, Collective::Broadcast, Collective::Reduce})
    cases.push_back({Algorithm::Tree, coll});
  // Ring plans of AlltoAll, Gather and Scatter are the direct ones (checked in builders_test).
  for (Collective coll : {Collective::AllReduce, Collective::Broadcast, Collective::Reduce, Collective::AllGather,
                          Collective::ReduceScatter, Collective::AlltoAll, Collective::Gather, Collective::Scatter})
    cases.push_back({Algorithm::Direct, coll});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Builders, Sweep, testing::ValuesIn(sweepCases()), caseName);

}  // namespace
}  // namespace loom
