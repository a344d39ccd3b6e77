// The shape of a communicator's bootstrap network, computed alike by every rank from the table:
// each host's ranks join the rank that leads that host (a star per host), and the leaders form a tree
// of fanout kLeaderFanout by host index (host h's children are h*k+1 .. h*k+k). A setup exchange
// gathers up the tree and comes back down it: depth O(log hosts), no rank holds more sockets than
// its host's ranks plus k + 1 leaders, and none moves more than (its host's ranks + k + 1) tables.
#pragma once

#include <vector>

#include "bootstrap/rank_table.h"

namespace loom {

constexpr int kLeaderFanout = 8;

// The host whose leader is host `host`'s parent in the tree of leaders; -1 for host 0, the root.
constexpr int parentHost(int host) { return host == 0 ? -1 : (host - 1) / kLeaderFanout; }

struct BootstrapTree {
  int rank = 0;
  int host = 0;
  int leader = 0;  // of this rank's host
  // A leader's: the other ranks of its host, ascending.
  std::vector<int> locals;
  // A leader's: its parent host's leader (-1 at the root of the tree), its child hosts' leaders, and
  // the ranks of each child's subtree in the order that child sends them up.
  int parentLeader = -1;
  std::vector<int> childLeaders;
  std::vector<std::vector<int>> childOrder;
  // A leader's: the ranks of its own subtree in the order it sends them up.
  std::vector<int> order;

  bool isLeader() const { return rank == leader; }
  static BootstrapTree of(const RankTable& table, int rank);
};

}  // namespace loom
