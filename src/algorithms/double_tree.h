// The two complementary binary trees of a double binary tree (NCCL's ncclGetDtree, src/graph/trees.cc),
// over the positions 0..n-1 of a channel's ordering. Every tree's root has a single child; the inner
// nodes of one tree are mostly leaves of the other, so each rank sends about as much in the two trees
// together as a ring would make it send. Internal to algorithms/.
#pragma once

namespace loom::detail {

// One rank's place in one tree, as positions (-1: none).
struct TreeLinks {
  int parent = -1;
  int children[2] = {-1, -1};
  int nchildren = 0;
  int depth = 0;  // hops from the root
};

// Tree `tree` (0 or 1) over n positions, seen from position pos.
//   rootPos < 0: NCCL's pair for AllReduce. Tree 0 is the binary tree rooted at 0; tree 1 mirrors it
//     (position n-1-v) for even n and shifts it by one (position v+1) for odd n.
//   rootPos >= 0: both trees rooted at rootPos (Reduce, Broadcast): tree 0 is the binary tree over the
//     positions after rootPos; tree 1 renumbers the non-root positions so that the leaves of tree 0
//     (odd offsets from the root) become inner nodes (mirrored for odd n, rotated by one for even n).
TreeLinks treeLinks(int n, int tree, int rootPos, int pos);

// The largest distance from a root to a leaf in either tree.
int treeDepth(int n);

}  // namespace loom::detail
