#include "algorithms/double_tree.h"

#include <bit>
#include <initializer_list>

namespace loom::detail {
namespace {

// NCCL's btree over virtual ranks 0..n-1 rooted at 0: a node's parent clears its lowest set bit and
// sets the next one (xx01[0] -> xx10[0]), or only clears it when that lands out of range.
int btreeParent(int n, int v) {
  if (v == 0) return -1;
  const int bit = v & -v;
  const int up = (v ^ bit) | (bit << 1);
  return up < n ? up : v ^ bit;
}

// Children are v +- a power of two; at most two of those name v as their parent.
void btreeChildren(int n, int v, TreeLinks* links) {
  links->nchildren = 0;
  for (int b = 1; b < n; b <<= 1) {
    for (int c : {v - b, v + b}) {
      if (c <= 0 || c >= n || btreeParent(n, c) != v) continue;
      if (links->nchildren < 2) links->children[links->nchildren] = c;
      ++links->nchildren;
    }
  }
}

// Tree 1's renumbering of the positions relative to the root (w = 1..n-1 when rooted).
int rootedVirtualOf(int n, int w) {
  if (w == 0) return 0;
  if (n % 2 == 1) return n - w;  // odd n: mirror, which flips the parity of every offset
  return w == 1 ? n - 1 : w - 1;  // even n: rotate the non-root positions by one
}

int rootedOffsetOf(int n, int v) {
  if (v == 0) return 0;
  if (n % 2 == 1) return n - v;
  return v == n - 1 ? 1 : v + 1;
}

}  // namespace

TreeLinks treeLinks(int n, int tree, int rootPos, int pos) {
  // Maps between positions and the virtual ranks the btree is built on.
  auto toVirtual = [&](int p) {
    if (rootPos < 0) {
      if (tree == 0) return p;
      return n % 2 == 0 ? n - 1 - p : (p - 1 + n) % n;
    }
    const int w = (p - rootPos + n) % n;
    return tree == 0 ? w : rootedVirtualOf(n, w);
  };
  auto toPosition = [&](int v) {
    if (v < 0) return -1;
    if (rootPos < 0) {
      if (tree == 0) return v;
      return n % 2 == 0 ? n - 1 - v : (v + 1) % n;
    }
    const int w = tree == 0 ? v : rootedOffsetOf(n, v);
    return (w + rootPos) % n;
  };
  const int v = toVirtual(pos);
  TreeLinks links;
  btreeChildren(n, v, &links);
  links.parent = toPosition(btreeParent(n, v));
  for (int u = v; u != 0; u = btreeParent(n, u)) ++links.depth;
  for (int i = 0; i < links.nchildren; ++i) links.children[i] = toPosition(links.children[i]);
  return links;
}

int treeDepth(int n) {
  // The chain 0 <- B <- B/2 + ... (B the largest power of two below n) is the longest: one level per bit.
  return n <= 1 ? 0 : static_cast<int>(std::bit_width(static_cast<unsigned>(n - 1)));
}

}  // namespace loom::detail
