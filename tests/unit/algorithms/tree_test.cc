// Double binary trees: the shapes (spanning binary trees, complementary inner nodes, roots) and the
// tree plans' structure. The verifier sweep (verifier_sweep_test.cc) proves the plans correct.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "algorithms/builders.h"
#include "algorithms/double_tree.h"
#include "algorithms/verifier.h"

namespace loom {
namespace {

using detail::TreeLinks;
using detail::treeLinks;

// Every position's links for one tree.
std::vector<TreeLinks> wholeTree(int n, int tree, int rootPos) {
  std::vector<TreeLinks> links(n);
  for (int p = 0; p < n; ++p) links[p] = treeLinks(n, tree, rootPos, p);
  return links;
}

// One root, parents and children agree, every position reaches the root, depths match.
void expectSpanningBinaryTree(int n, int tree, int rootPos, const std::vector<TreeLinks>& t) {
  int roots = 0;
  for (int p = 0; p < n; ++p) {
    const TreeLinks& l = t[p];
    ASSERT_LE(l.nchildren, 2);
    if (l.parent < 0) {
      ++roots;
      EXPECT_EQ(l.depth, 0);
      if (rootPos >= 0) {
        EXPECT_EQ(p, rootPos);
      }
      EXPECT_EQ(l.nchildren, n > 1 ? 1 : 0) << "the root has a single child";
    } else {
      ASSERT_LT(l.parent, n);
      EXPECT_EQ(t[l.parent].depth + 1, l.depth);
      int found = 0;
      for (int c = 0; c < t[l.parent].nchildren; ++c) found += t[l.parent].children[c] == p;
      EXPECT_EQ(found, 1) << "n=" << n << " tree " << tree << ": " << p << " is not a child of its parent";
    }
    for (int c = 0; c < l.nchildren; ++c) {
      ASSERT_GE(l.children[c], 0);
      ASSERT_LT(l.children[c], n);
      EXPECT_EQ(t[l.children[c]].parent, p);
    }
    int hops = 0;
    for (int q = p; t[q].parent >= 0 && hops <= n; q = t[q].parent) ++hops;
    EXPECT_EQ(hops, l.depth) << "n=" << n << " position " << p << " does not reach the root";
    EXPECT_LE(l.depth, detail::treeDepth(n));
  }
  EXPECT_EQ(roots, 1);
}

TEST(DoubleTree, TreesSpanEveryPosition) {
  for (int n = 1; n <= 130; ++n) {
    for (int tree = 0; tree < 2; ++tree) {
      expectSpanningBinaryTree(n, tree, -1, wholeTree(n, tree, -1));
      for (int root : std::set<int>{0, n / 2, n - 1, std::min(1, n - 1)})
        expectSpanningBinaryTree(n, tree, root, wholeTree(n, tree, root));
    }
  }
}

TEST(DoubleTree, DepthIsLogarithmic) {
  EXPECT_EQ(detail::treeDepth(1), 0);
  EXPECT_EQ(detail::treeDepth(2), 1);
  EXPECT_EQ(detail::treeDepth(8), 3);
  EXPECT_EQ(detail::treeDepth(1024), 10);
  EXPECT_EQ(detail::treeDepth(1025), 11);
  for (int n : {3, 17, 100, 1000}) {
    int deepest = 0;
    for (int tree = 0; tree < 2; ++tree)
      for (const TreeLinks& l : wholeTree(n, tree, -1)) deepest = std::max(deepest, l.depth);
    EXPECT_EQ(deepest, detail::treeDepth(n)) << n;
  }
}

// NCCL's property: with an even count no rank is an inner node of both trees (so each rank forwards
// about as much as in a ring); the AllReduce trees are rooted at 0 and n-1 (even) or 1 (odd).
TEST(DoubleTree, AllReduceTreesAreComplementary) {
  for (int n = 2; n <= 128; ++n) {
    const std::vector<TreeLinks> t0 = wholeTree(n, 0, -1), t1 = wholeTree(n, 1, -1);
    EXPECT_LT(t0[0].parent, 0);
    EXPECT_LT(t1[n % 2 == 0 ? n - 1 : 1].parent, 0);
    if (n % 2 != 0) continue;
    for (int p = 0; p < n; ++p)
      EXPECT_FALSE(t0[p].nchildren > 0 && t1[p].nchildren > 0) << "n=" << n << " position " << p << " inner in both";
  }
}

// Rooted trees share the root; the non-root inner nodes of one tree are mostly leaves of the other.
TEST(DoubleTree, RootedTreesMostlyComplement) {
  for (int n = 3; n <= 128; ++n) {
    for (int root : {0, n / 3, n - 1}) {
      const std::vector<TreeLinks> t0 = wholeTree(n, 0, root), t1 = wholeTree(n, 1, root);
      int both = 0;
      for (int p = 0; p < n; ++p)
        if (p != root && t0[p].nchildren > 0 && t1[p].nchildren > 0) ++both;
      EXPECT_LE(both, 2) << "n=" << n << " root " << root;
    }
  }
}

PlanRequest treeRequest(Collective coll, int n, int rank, uint64_t count, uint64_t chunk, int channels) {
  PlanRequest req;
  req.coll = coll;
  req.nranks = n;
  req.rank = rank;
  req.count = count;
  req.chunkElems = chunk;
  req.nchannels = channels;
  return req;
}

// A channel's lane talks only to its tree neighbours: at most three peers, in logarithmic depth.
TEST(TreePlans, LanesTalkToTreeNeighboursOnly) {
  const int n = 64;
  for (int r = 0; r < n; ++r) {
    Plan plan;
    ASSERT_TRUE(buildTreePlan(treeRequest(Collective::AllReduce, n, r, 10000, 100, 2), &plan).ok());
    EXPECT_EQ(plan.algorithm, "tree");
    ASSERT_EQ(plan.lanes.size(), 2u);
    for (const Lane& lane : plan.lanes) {
      std::set<int> peers;
      for (const Step& s : lane.steps) {
        if (s.sendPeer >= 0) peers.insert(s.sendPeer);
        if (s.recvPeer >= 0) peers.insert(s.recvPeer);
      }
      EXPECT_LE(peers.size(), 3u);
      EXPECT_EQ(peers.count(r), 0u);
    }
  }
}

// The lag between reduction and broadcast never needs more than the two FIFO slots the verifier gives
// connections, even for long pipelines on deep trees (the sweep covers shorter ones).
TEST(TreePlans, LongPipelinesVerify) {
  for (int n : {2, 3, 31, 64}) {
    for (int channels : {1, 2}) {
      PlanRequest req = treeRequest(Collective::AllReduce, n, 0, 2000, 7, channels);
      const Status st = verifyAlgorithm(Algorithm::Tree, req);
      EXPECT_TRUE(st.ok()) << "n=" << n << " channels=" << channels << ": " << st.message();
    }
  }
}

// Reduce keeps partial sums in scratch only where a non-root rank has two children.
TEST(TreePlans, ReduceUsesScratchForPartials) {
  bool someScratch = false;
  for (int r = 0; r < 16; ++r) {
    Plan plan;
    ASSERT_TRUE(buildTreePlan(treeRequest(Collective::Reduce, 16, r, 50, 8, 2), &plan).ok());
    EXPECT_TRUE(plan.scratchElems == 0 || plan.scratchElems == 50);
    someScratch = someScratch || plan.scratchElems > 0;
    Plan all;
    ASSERT_TRUE(buildTreePlan(treeRequest(Collective::AllReduce, 16, r, 50, 8, 2), &all).ok());
    EXPECT_EQ(all.scratchElems, 0u);
  }
  EXPECT_TRUE(someScratch);
}

}  // namespace
}  // namespace loom
