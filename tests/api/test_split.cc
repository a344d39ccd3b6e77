// loomCommSplit: several colours, keys that reverse the order, LOOM_SPLIT_NOCOLOR, equal keys,
// splits of splits, several split communicators alive at once, and collectives on all of them.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "cases.h"
#include "launch_config.h"

namespace loomtest {
namespace {

// The members of rank's group, in new-rank order, given every rank's colour and key (NCCL's rule:
// ascending key, ties by original rank).
std::vector<int> expectedMembers(const std::vector<int>& colors, const std::vector<int>& keys, int rank) {
  std::vector<int> members;
  for (int r = 0; r < static_cast<int>(colors.size()); ++r)
    if (colors[r] == colors[rank]) members.push_back(r);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return keys[a] < keys[b]; });
  return members;
}

// Checks a split communicator's size, rank and membership (by an allgather of original ranks), then
// runs a small matrix of collectives on it.
// sub becomes null if a failed call made runCases abort it.
std::string checkSplitComm(RankContext& parent, loomComm_t& sub, const std::vector<int>& members,
                           const std::string& label) {
  const int size = static_cast<int>(members.size());
  const int myNew = static_cast<int>(std::find(members.begin(), members.end(), parent.rank) - members.begin());
  int count = -1, rank = -1;
  LT_CALL(sub, loomCommCount(sub, &count));
  LT_CALL(sub, loomCommUserRank(sub, &rank));
  if (count != size || rank != myNew)
    return label + ": loomCommCount/UserRank gave " + std::to_string(count) + "/" + std::to_string(rank) +
           ", expected " + std::to_string(size) + "/" + std::to_string(myNew);
  std::vector<int32_t> gathered(size, -1);
  int32_t me = parent.rank;
  LT_CALL(sub, loomAllGather(&me, gathered.data(), 1, loomInt32, sub, nullptr));
  for (int i = 0; i < size; ++i)
    if (gathered[i] != members[i])
      return label + ": allgather of original ranks gave rank " + std::to_string(gathered[i]) + " at new rank " +
             std::to_string(i) + ", expected " + std::to_string(members[i]);
  int64_t mine = parent.rank + 1, sum = 0;
  LT_CALL(sub, loomAllReduce(&mine, &sum, 1, loomInt64, loomSum, sub, nullptr));
  int64_t want = 0;
  for (int m : members) want += m + 1;
  if (sum != want) return label + ": allreduce over the split gave " + std::to_string(sum) + ", expected " + std::to_string(want);

  RankContext ctx = parent;
  ctx.comm = sub;
  ctx.rank = myNew;
  ctx.nranks = size;
  std::vector<Case> cases = buildCases({.colls = {Coll::AllReduce, Coll::Broadcast, Coll::ReduceScatter,
                                                  Coll::AllGather, Coll::SendRecv},
                                        .dtypes = {loomFloat32, loomInt32, loomBfloat16},
                                        .ops = {Op::Sum, Op::Max, Op::Avg},
                                        .counts = {3, 1000},
                                        .crossDtypeOp = false},
                                       size);
  std::string failures = runCases(ctx, cases);
  if (!ctx.comm) sub = nullptr;
  return failures.empty() ? "" : label + ": " + failures;
}

class Split : public ::testing::TestWithParam<RanksParam> {
 protected:
  void run(const RankBody& body) {
    RunOptions options;
    options.transport = GetParam().transport;
    options.timeoutSec = 300;
    std::string failures = runRanks(testLaunch(), GetParam().nranks, options, body);
    EXPECT_TRUE(failures.empty()) << failures;
  }
};

// Colours rank % k, key n - rank: each group's new ranks run in reverse original order.
TEST_P(Split, ColoursWithReversedKeys) {
  run([](RankContext& ctx) -> std::string {
    const int n = ctx.nranks;
    for (int k : {1, 2, 3}) {
      std::vector<int> colors(n), keys(n);
      for (int r = 0; r < n; ++r) {
        colors[r] = r % k;
        keys[r] = n - r;
      }
      ctx.note("split k=" + std::to_string(k));
      loomComm_t sub = nullptr;
      LT_CALL(ctx.comm, loomCommSplit(ctx.comm, colors[ctx.rank], keys[ctx.rank], &sub, nullptr));
      if (!sub) return "loomCommSplit returned a null communicator for colour " + std::to_string(colors[ctx.rank]);
      std::string f = checkSplitComm(ctx, sub, expectedMembers(colors, keys, ctx.rank),
                                     "split into " + std::to_string(k) + " colours");
      if (sub) LT_CALL(sub, loomCommDestroy(sub));
      if (!f.empty()) return f;
    }
    // The parent still works after its splits are gone.
    int32_t one = 1, sum = 0;
    LT_CALL(ctx.comm, loomAllReduce(&one, &sum, 1, loomInt32, loomSum, ctx.comm, nullptr));
    if (sum != n) return "parent allreduce after splits gave " + std::to_string(sum);
    return "";
  });
}

// Ranks with rank % 3 == 2 pass LOOM_SPLIT_NOCOLOR and must get NULL; the others form one group.
TEST_P(Split, NoColorGivesNull) {
  run([](RankContext& ctx) -> std::string {
    const int n = ctx.nranks;
    std::vector<int> colors(n), keys(n);
    for (int r = 0; r < n; ++r) {
      colors[r] = r % 3 == 2 ? LOOM_SPLIT_NOCOLOR : 7;
      keys[r] = r;
    }
    loomComm_t sub = reinterpret_cast<loomComm_t>(0x1);  // must be overwritten either way
    LT_CALL(ctx.comm, loomCommSplit(ctx.comm, colors[ctx.rank], keys[ctx.rank], &sub, nullptr));
    if (colors[ctx.rank] == LOOM_SPLIT_NOCOLOR) {
      if (sub != nullptr) return "LOOM_SPLIT_NOCOLOR did not give a NULL communicator";
    } else {
      if (!sub || sub == reinterpret_cast<loomComm_t>(0x1)) return "loomCommSplit did not set newcomm";
      std::string f = checkSplitComm(ctx, sub, expectedMembers(colors, keys, ctx.rank), "NOCOLOR split");
      if (sub) LT_CALL(sub, loomCommDestroy(sub));
      if (!f.empty()) return f;
    }
    int32_t one = 1, sum = 0;
    LT_CALL(ctx.comm, loomAllReduce(&one, &sum, 1, loomInt32, loomSum, ctx.comm, nullptr));
    if (sum != n) return "parent allreduce after a NOCOLOR split gave " + std::to_string(sum);
    return "";
  });
}

// Equal keys keep the original order; a split of a split works; two splits alive at once, used in
// alternation with the parent, do not mix up their traffic.
TEST_P(Split, EqualKeysNestedAndConcurrent) {
  run([](RankContext& ctx) -> std::string {
    const int n = ctx.nranks;
    std::vector<int> zeros(n, 0), evenOdd(n), keys(n);
    for (int r = 0; r < n; ++r) {
      evenOdd[r] = r % 2;
      keys[r] = (r * 5) % 3;  // repeated keys, not monotonic in rank
    }
    loomComm_t all = nullptr, halves = nullptr;
    ctx.note("split equal keys");
    LT_CALL(ctx.comm, loomCommSplit(ctx.comm, 0, 0, &all, nullptr));
    ctx.note("split even/odd");
    LT_CALL(ctx.comm, loomCommSplit(ctx.comm, evenOdd[ctx.rank], keys[ctx.rank], &halves, nullptr));
    if (!all || !halves) return "loomCommSplit returned a null communicator";
    std::string f = checkSplitComm(ctx, all, expectedMembers(zeros, zeros, ctx.rank), "equal-key split");
    if (f.empty()) f = checkSplitComm(ctx, halves, expectedMembers(evenOdd, keys, ctx.rank), "even/odd split");
    // Interleave: parent, halves, all, parent.
    for (loomComm_t c : {ctx.comm, halves, all, ctx.comm}) {
      if (!c) break;
      if (!f.empty()) break;
      int size = 0;
      LT_CALL(c, loomCommCount(c, &size));
      int32_t one = 1, sum = 0;
      LT_CALL(c, loomAllReduce(&one, &sum, 1, loomInt32, loomSum, c, nullptr));
      if (sum != size) f = "interleaved allreduce gave " + std::to_string(sum) + " on a comm of " + std::to_string(size);
    }
    // Split the even/odd communicator again by its own rank parity, keys reversing.
    if (f.empty() && halves) {
      int hr = 0, hn = 0;
      LT_CALL(halves, loomCommUserRank(halves, &hr));
      LT_CALL(halves, loomCommCount(halves, &hn));
      loomComm_t quarter = nullptr;
      ctx.note("split of a split");
      LT_CALL(halves, loomCommSplit(halves, hr % 2, hn - hr, &quarter, nullptr));
      if (!quarter) return "split of a split returned NULL";
      // Members in original ranks: the even/odd group in its order, then filtered and reordered.
      std::vector<int> halfMembers = expectedMembers(evenOdd, keys, ctx.rank);
      std::vector<int> colors2(n, -1), keys2(n, 0);
      for (int i = 0; i < hn; ++i) {
        colors2[halfMembers[i]] = i % 2;
        keys2[halfMembers[i]] = hn - i;
      }
      std::vector<int> members;
      for (int r = 0; r < n; ++r)
        if (colors2[r] == colors2[ctx.rank] && evenOdd[r] == evenOdd[ctx.rank]) members.push_back(r);
      std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
        if (keys2[a] != keys2[b]) return keys2[a] < keys2[b];
        return std::find(halfMembers.begin(), halfMembers.end(), a) < std::find(halfMembers.begin(), halfMembers.end(), b);
      });
      f = checkSplitComm(ctx, quarter, members, "split of a split");
      if (quarter) LT_CALL(quarter, loomCommDestroy(quarter));
    }
    if (all) LT_CALL(all, loomCommDestroy(all));
    if (halves) LT_CALL(halves, loomCommDestroy(halves));
    return f;
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, Split, ::testing::ValuesIn(ranksParams()), ranksParamName);

}  // namespace
}  // namespace loomtest
