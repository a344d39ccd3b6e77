// Hierarchical AllReduce: proven by the verifier over ranks 1..64 and every node size that divides
// them (a spread past 16 ranks), awkward counts, chunk sizes and channels, both layouts; and checked
// to keep inter-node traffic on rails (between ranks with the same local index).
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "algorithms/builders.h"
#include "algorithms/verifier.h"

namespace loom {
namespace {

std::vector<int> nodeSizes(int n) {
  std::vector<int> sizes;
  for (int k = 1; k <= n; ++k)
    if (n % k == 0 && (n <= 16 || k == 1 || k == 2 || k == 4 || k == 8 || k == n / 2 || k == n)) sizes.push_back(k);
  return sizes;
}

PlanRequest hierRequest(int n, int k, uint64_t count, uint64_t chunk, int channels) {
  PlanRequest req;
  req.coll = Collective::AllReduce;
  req.nranks = n;
  req.ranksPerNode = k;
  req.count = count;
  req.elemSize = 4;
  req.chunkElems = chunk;
  req.nchannels = channels;
  return req;
}

TEST(Hierarchical, VerifiesEveryShape) {
  int verified = 0;
  for (int n : {1, 2, 3, 4, 6, 8, 9, 12, 16, 24, 32, 48, 64}) {
    for (int k : nodeSizes(n)) {
      std::set<uint64_t> counts = {0, 1, 2, 3, 13, static_cast<uint64_t>(n) + 1};
      if (n > 1) counts.insert(n - 1);
      if (n <= 16) {
        counts.insert(97);
        counts.insert(2 * n * 7 + 5);
      }
      for (uint64_t count : counts) {
        for (uint64_t chunk : {uint64_t{1}, uint64_t{3}, uint64_t{64}, uint64_t{1} << 40}) {
          if (chunk == 1 && n > 16 && count > 13) continue;
          for (int channels : {1, 2, 3}) {
            const Status st = verifyAlgorithm(Algorithm::Hierarchical, hierRequest(n, k, count, chunk, channels));
            ASSERT_TRUE(st.ok()) << "n=" << n << " ranksPerNode=" << k << " count=" << count << " chunk=" << chunk
                                 << " channels=" << channels << ": " << st.message();
            ++verified;
          }
        }
      }
    }
  }
  RecordProperty("verified", verified);
}

// Messages between nodes only join ranks of one rail; inside a node only the ring neighbours talk.
TEST(Hierarchical, InterNodeTrafficStaysOnRails) {
  const int n = 32, k = 8;
  for (int r = 0; r < n; ++r) {
    PlanRequest req = hierRequest(n, k, 4096, 64, 2);
    req.rank = r;
    Plan plan;
    ASSERT_TRUE(buildHierarchicalPlan(req, &plan).ok());
    EXPECT_EQ(plan.algorithm, "hier");
    EXPECT_EQ(plan.lanes.size(), 2u);
    for (const Lane& lane : plan.lanes) {
      for (const Step& s : lane.steps) {
        for (int peer : {s.sendPeer, s.recvPeer}) {
          if (peer < 0) continue;
          if (peer / k != r / k) {
            EXPECT_EQ(peer % k, r % k) << "rank " << r << " talks to " << peer << " across nodes off its rail";
          } else {
            const int d = (peer % k - r % k + k) % k;
            EXPECT_TRUE(d == 1 || d == k - 1) << "rank " << r << " talks to " << peer << " inside its node";
          }
        }
      }
    }
  }
}

// Each rank sends 2(N-1)/N of one block (count/k) between nodes, against a flat ring's share crossing
// the node boundary: the saving that makes the hierarchy pay when NICs are slow.
TEST(Hierarchical, SendsOneBlockShareBetweenNodes) {
  const int n = 16, k = 4, nodes = n / k;
  const uint64_t count = 16 * 1024;
  PlanRequest req = hierRequest(n, k, count, 256, 1);
  req.rank = 5;
  Plan plan;
  ASSERT_TRUE(buildHierarchicalPlan(req, &plan).ok());
  uint64_t inter = 0;
  for (const Step& s : plan.lanes[0].steps)
    if (s.sendPeer >= 0 && s.sendPeer / k != req.rank / k) inter += s.count;
  EXPECT_EQ(inter, 2 * (nodes - 1) * (count / k) / nodes);
}

}  // namespace
}  // namespace loom
