#include "bootstrap/bootstrap_tree.h"

namespace loom {
namespace {

std::vector<int> childHosts(int host, int nhosts) {
  std::vector<int> children;
  for (long c = static_cast<long>(host) * kLeaderFanout + 1; c <= static_cast<long>(host) * kLeaderFanout + kLeaderFanout && c < nhosts; ++c)
    children.push_back(static_cast<int>(c));
  return children;
}

// Host `host`'s ranks, then each child's subtree, depth first (iteratively: a tree of 64k hosts is
// only 6 deep, but nothing here should depend on it).
std::vector<int> subtreeOrder(int host, const std::vector<std::vector<int>>& ranksOfHost) {
  std::vector<int> order, stack{host};
  const int nhosts = static_cast<int>(ranksOfHost.size());
  while (!stack.empty()) {
    const int h = stack.back();
    stack.pop_back();
    order.insert(order.end(), ranksOfHost[static_cast<size_t>(h)].begin(), ranksOfHost[static_cast<size_t>(h)].end());
    std::vector<int> children = childHosts(h, nhosts);
    stack.insert(stack.end(), children.rbegin(), children.rend());
  }
  return order;
}

}  // namespace

BootstrapTree BootstrapTree::of(const RankTable& table, int rank) {
  BootstrapTree t;
  t.rank = rank;
  t.host = table.hostOfRank[static_cast<size_t>(rank)];
  t.leader = table.leaderOfHost[static_cast<size_t>(t.host)];
  if (!t.isLeader()) return t;
  std::vector<std::vector<int>> ranksOfHost(static_cast<size_t>(table.nhosts()));
  for (int r = 0; r < table.nranks(); ++r) ranksOfHost[static_cast<size_t>(table.hostOfRank[static_cast<size_t>(r)])].push_back(r);
  for (int r : ranksOfHost[static_cast<size_t>(t.host)])
    if (r != rank) t.locals.push_back(r);
  if (t.host > 0) t.parentLeader = table.leaderOfHost[static_cast<size_t>(parentHost(t.host))];
  for (int child : childHosts(t.host, table.nhosts())) {
    t.childLeaders.push_back(table.leaderOfHost[static_cast<size_t>(child)]);
    t.childOrder.push_back(subtreeOrder(child, ranksOfHost));
  }
  t.order = subtreeOrder(t.host, ranksOfHost);
  return t;
}

}  // namespace loom
