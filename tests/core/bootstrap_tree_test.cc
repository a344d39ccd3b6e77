// The bootstrap across hosts (src/bootstrap): the compact rank table survives its trip and refuses
// corrupt bytes; the tree of host leaders covers every rank once, within its fanout; and ranks of
// simulated hosts (threads presenting other hosts' identities, each its own process) elect leaders,
// receive the table and exchange parts of every size through the tree, and a rank that leaves is
// named by its leader.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/hash.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/root.h"

namespace {

using namespace loom;

RankInfo simulatedRank(int rank, int host) {
  RankInfo info;
  info.listenAddress.family = AF_INET;
  info.listenAddress.addr[0] = 127;
  info.listenAddress.addr[3] = 1;
  info.process.hostHash = Fnv1a(0x74657374).value(host).digest();
  std::snprintf(info.process.hostname, sizeof(info.process.hostname), "host-%d", host);
  info.process.pid = 1000 + rank;
  info.process.nonce = Fnv1a(0x6e6f6e).value(rank).digest();
  info.cudaDevice = rank % 4;
  info.statePort = static_cast<uint16_t>(2000 + rank);
  return info;
}

TEST(BootstrapTree, TheCompactTableSurvivesItsTrip) {
  constexpr int kRanks = 13;
  std::vector<RankInfo> ranks;
  std::vector<int32_t> hostOf;
  for (int r = 0; r < kRanks; ++r) {
    ranks.push_back(simulatedRank(r, r % 3));
    ranks.back().listenAddress.port = static_cast<uint16_t>(40000 + r);
    if (r == 5) ranks.back().listenAddress.addr[3] = 2;  // a second address on one host
    hostOf.push_back(r % 3);
  }
  const std::vector<int32_t> leaders{0, 1, 2};
  const std::vector<char> bytes = encodeRankTable(77, ranks, hostOf, leaders);
  EXPECT_EQ(bytes.size(), 24u + 3 * 80 + 2 * sizeof(SocketAddress) + kRanks * 32);
  RankTable t;
  ASSERT_TRUE(decodeRankTable(bytes.data(), bytes.size(), kRanks, &t).ok());
  ASSERT_EQ(t.nranks(), kRanks);
  EXPECT_EQ(t.id, 77u);
  EXPECT_EQ(t.leaderOfHost, leaders);
  EXPECT_EQ(t.hostOfRank, hostOf);
  for (int r = 0; r < kRanks; ++r) {
    const RankInfo& a = ranks[static_cast<size_t>(r)];
    const RankInfo& b = t.ranks[static_cast<size_t>(r)];
    EXPECT_EQ(0, std::memcmp(&a.listenAddress, &b.listenAddress, sizeof(a.listenAddress))) << "rank " << r;
    EXPECT_TRUE(a.process.sameProcess(b.process)) << "rank " << r;
    EXPECT_EQ(a.process.host(), b.process.host());
    EXPECT_EQ(a.cudaDevice, b.cudaDevice);
    EXPECT_EQ(a.statePort, b.statePort);
  }
}

TEST(BootstrapTree, ACorruptTableIsRefusedWithAReason) {
  std::vector<RankInfo> ranks{simulatedRank(0, 0), simulatedRank(1, 1)};
  ranks[0].listenAddress.port = 1;
  ranks[1].listenAddress.port = 2;
  const std::vector<char> good = encodeRankTable(1, ranks, {0, 1}, {0, 1});
  RankTable t;
  EXPECT_FALSE(decodeRankTable(good.data(), good.size(), 3, &t).ok());          // another rank count
  EXPECT_FALSE(decodeRankTable(good.data(), good.size() - 1, 2, &t).ok());      // truncated
  std::vector<char> bad = good;
  const size_t hostsAt = 24, leaderAt = hostsAt + 80 + 72;  // host 1's leader field
  int32_t wrongLeader = 0;  // rank 0 is on host 0
  std::memcpy(bad.data() + leaderAt, &wrongLeader, sizeof(wrongLeader));
  Status st = decodeRankTable(bad.data(), bad.size(), 2, &t);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("host 1 is led by rank 0"), std::string::npos) << st.message();
  bad = good;
  const size_t rank1At = good.size() - 32;
  uint32_t wrongHost = 7;
  std::memcpy(bad.data() + rank1At, &wrongHost, sizeof(wrongHost));
  st = decodeRankTable(bad.data(), bad.size(), 2, &t);
  EXPECT_NE(st.message().find("rank 1 has host 7"), std::string::npos) << st.message();
}

// A leader's subtree order is its host's ranks, then each child's subtree; the root's covers all.
TEST(BootstrapTree, LeadersCoverEveryRankOnceWithinTheirFanout) {
  for (int nhosts : {1, 2, 9, 10, 73, 600}) {
    RankTable t;
    for (int h = 0; h < nhosts; ++h) {
      const int size = 1 + (h * 7) % 5;  // hosts of 1..5 ranks
      t.leaderOfHost.push_back(static_cast<int32_t>(t.hostOfRank.size()) + (h % 2 ? size - 1 : 0));
      for (int i = 0; i < size; ++i) t.hostOfRank.push_back(h);
    }
    t.ranks.resize(t.hostOfRank.size());
    const BootstrapTree root = BootstrapTree::of(t, t.leaderOfHost[0]);
    std::vector<int> sorted = root.order;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int> all(t.ranks.size());
    std::iota(all.begin(), all.end(), 0);
    EXPECT_EQ(sorted, all) << nhosts << " hosts";
    int deepest = 0;
    for (int h = 0; h < nhosts; ++h) {
      const BootstrapTree leader = BootstrapTree::of(t, t.leaderOfHost[static_cast<size_t>(h)]);
      ASSERT_TRUE(leader.isLeader());
      EXPECT_LE(leader.childLeaders.size(), static_cast<size_t>(kLeaderFanout));
      std::vector<int> expected;
      for (size_t r = 0; r < t.ranks.size(); ++r)
        if (t.hostOfRank[r] == h) expected.push_back(static_cast<int>(r));
      for (const auto& child : leader.childOrder) expected.insert(expected.end(), child.begin(), child.end());
      EXPECT_EQ(leader.order, expected);
      int depth = 0;
      for (int up = h; up > 0; up = (up - 1) / kLeaderFanout) ++depth;
      deepest = std::max(deepest, depth);
      EXPECT_EQ(leader.parentLeader, h == 0 ? -1 : t.leaderOfHost[static_cast<size_t>((h - 1) / kLeaderFanout)]);
    }
    int bound = 0;  // ceil(log_k(hosts)) levels below the root
    for (long reach = 1, level = 1; reach < nhosts; ++bound, level *= kLeaderFanout) reach += level * kLeaderFanout;
    EXPECT_LE(deepest, bound) << nhosts << " hosts";
  }
}

// Ranks of simulated hosts as threads of this process, each presenting its own process.
struct SimulatedJob {
  UniqueIdData id;
  std::thread root;
  explicit SimulatedJob(int nranks) {
    for (size_t i = 0; i < kSecretBytes; ++i) id.secret[i] = static_cast<uint8_t>(nranks + 3 * i);
    SocketAddress local;
    local.family = AF_INET;
    local.addr[0] = 127;
    local.addr[3] = 1;
    Socket listener;
    EXPECT_TRUE(listenOn(local, &listener, &id.root).ok());
    root = std::thread([this, l = std::move(listener)]() mutable { serveRendezvous(std::move(l), id, nullptr); });
  }
  ~SimulatedJob() {
    if (root.joinable()) root.join();
  }
};

TEST(BootstrapTree, RanksOfManyHostsExchangePartsThroughTheTree) {
  constexpr int kRanks = 40, kHosts = 11;  // host 0's leader has 8 children, host 1's two: depth 2
  SimulatedJob job(kRanks);
  std::vector<std::string> problems(kRanks);
  std::vector<int> leaders(kRanks, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      std::unique_ptr<Bootstrap> b;
      Status st = Bootstrap::create(job.id, r, kRanks, simulatedRank(r, r % kHosts), 30000, nullptr, &b);
      if (!st.ok()) {
        problems[r] = st.message();
        return;
      }
      leaders[r] = b->tree().isLeader();
      if (b->table()[static_cast<size_t>((r + 1) % kRanks)].process.host() != "host-" + std::to_string((r + 1) % kRanks % kHosts))
        problems[r] = "the table has another rank's host wrong";
      for (size_t bytes : {1ul, 3ul, 64ul, 4099ul}) {
        std::vector<char> mine(bytes), all(bytes * kRanks);
        for (size_t i = 0; i < bytes; ++i) mine[i] = static_cast<char>(r * 13 + i);
        st = b->allGather(mine.data(), all.data(), bytes);
        if (!st.ok()) {
          problems[r] = st.message();
          return;
        }
        for (int q = 0; q < kRanks; ++q)
          for (size_t i = 0; i < bytes; ++i)
            if (all[q * bytes + i] != static_cast<char>(q * 13 + i))
              problems[r] = "rank " + std::to_string(q) + "'s part of " + std::to_string(bytes) + " bytes is wrong";
        if (!problems[r].empty()) return;
      }
      st = b->barrier();
      if (!st.ok()) problems[r] = st.message();
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(problems[r], "") << "rank " << r;
  EXPECT_EQ(std::accumulate(leaders.begin(), leaders.end(), 0), kHosts);
}

TEST(BootstrapTree, ARankThatLeavesIsNamedByItsLeader) {
  constexpr int kRanks = 6, kHosts = 2;
  SimulatedJob job(kRanks);
  std::vector<std::unique_ptr<Bootstrap>> b(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      EXPECT_TRUE(Bootstrap::create(job.id, r, kRanks, simulatedRank(r, r % kHosts), 3000, nullptr, &b[r]).ok());
    });
  for (auto& t : threads) t.join();
  for (auto& x : b) ASSERT_TRUE(x);
  int gone = 0;
  while (b[static_cast<size_t>(gone)]->tree().isLeader()) ++gone;
  const int leader = b[static_cast<size_t>(gone)]->tree().leader;
  b[static_cast<size_t>(gone)].reset();
  std::vector<Status> results(kRanks);
  threads.clear();
  for (int r = 0; r < kRanks; ++r)
    if (r != gone) threads.emplace_back([&, r] { results[r] = b[r]->barrier(); });
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    if (r == gone) continue;
    EXPECT_FALSE(results[r].ok()) << "rank " << r;
  }
  EXPECT_NE(results[leader].message().find("from rank " + std::to_string(gone) + " of this host"), std::string::npos)
      << results[leader].message();
}

}  // namespace
