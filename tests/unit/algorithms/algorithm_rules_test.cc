// LOOM_ALGO's rules (algorithms/algorithm_rules.h): the forms it takes, which rule covers which call,
// and errors that name the piece that is wrong.
#include <gtest/gtest.h>

#include <string>

#include "algorithms/algorithm_rules.h"

namespace loom {
namespace {

AlgorithmRules parsed(const std::string& text) {
  AlgorithmRules rules;
  const Status st = AlgorithmRules::parse(text, &rules);
  EXPECT_TRUE(st.ok()) << text << ": " << st.message();
  return rules;
}

std::string chosen(const AlgorithmRules& rules, Collective coll, uint64_t bytes) {
  const std::optional<Algorithm> algo = rules.forCall(coll, bytes);
  return algo ? algorithmName(*algo) : "tuned";
}

TEST(AlgorithmRules, OneWordIsEveryCollectiveAndSize) {
  for (const char* text : {"ring", "RING", " ring "}) {
    const AlgorithmRules rules = parsed(text);
    ASSERT_EQ(rules.rules().size(), 1u);
    for (Collective coll : {Collective::AllReduce, Collective::AlltoAll, Collective::Scatter})
      for (uint64_t bytes : {uint64_t{0}, uint64_t{1}, uint64_t{1} << 40, ~uint64_t{0} - 1})
        EXPECT_EQ(chosen(rules, coll, bytes), "ring") << text;
    EXPECT_EQ(rules.text(), "ring");
  }
  EXPECT_TRUE(parsed("").empty());
  EXPECT_TRUE(parsed("  ").empty());
  EXPECT_EQ(chosen(parsed(""), Collective::AllReduce, 8), "tuned");
}

TEST(AlgorithmRules, ByCollectiveAndSizeRange) {
  const AlgorithmRules rules = parsed("allreduce:0-64K:oneshot,64K-:ring");
  ASSERT_EQ(rules.rules().size(), 2u);
  EXPECT_EQ(rules.rules()[1].coll, Collective::AllReduce) << "a rule without a collective repeats the previous one's";
  EXPECT_EQ(chosen(rules, Collective::AllReduce, 0), "oneshot");
  EXPECT_EQ(chosen(rules, Collective::AllReduce, 65535), "oneshot");
  EXPECT_EQ(chosen(rules, Collective::AllReduce, 65536), "ring") << "ranges are half-open";
  EXPECT_EQ(chosen(rules, Collective::AllReduce, uint64_t{1} << 40), "ring");
  EXPECT_EQ(chosen(rules, Collective::AllGather, 100), "tuned") << "a call no rule covers is tuned";
  EXPECT_EQ(rules.text(), "allreduce:0-64K:oneshot,allreduce:64K-:ring");
  EXPECT_EQ(parsed(rules.text()).text(), rules.text());

  // Collectives as NCCL and nccl-tests name them, any case, underscores ignored; sizes K/M/G; inf.
  const AlgorithmRules more = parsed("All_Reduce:1k-2M:tree, broadcast:ring , reduce_scatter:1G-inf:direct,alltoall:direct");
  EXPECT_EQ(chosen(more, Collective::AllReduce, 1023), "tuned");
  EXPECT_EQ(chosen(more, Collective::AllReduce, 1024), "tree");
  EXPECT_EQ(chosen(more, Collective::AllReduce, 2 << 20), "tuned");
  EXPECT_EQ(chosen(more, Collective::Broadcast, 5), "ring");
  EXPECT_EQ(chosen(more, Collective::ReduceScatter, uint64_t{1} << 30), "direct");
  EXPECT_EQ(chosen(more, Collective::ReduceScatter, (uint64_t{1} << 30) - 1), "tuned");
  EXPECT_EQ(chosen(more, Collective::AlltoAll, 1), "direct");
  EXPECT_EQ(more.text(), "allreduce:1K-2M:tree,broadcast:ring,reducescatter:1G-:direct,alltoall:direct");

  // A first rule without a collective covers every collective; a range alone, every collective too.
  const AlgorithmRules leading = parsed("0-4K:tree,64K-:ring");
  EXPECT_FALSE(leading.rules()[0].coll.has_value());
  EXPECT_EQ(chosen(leading, Collective::Reduce, 100), "tree");
  EXPECT_EQ(chosen(leading, Collective::AllGather, 1 << 20), "ring");
  EXPECT_EQ(chosen(leading, Collective::AllGather, 8192), "tuned");
}

TEST(AlgorithmRules, TheLastRuleCoveringACallDecides) {
  const AlgorithmRules rules = parsed("ring,allreduce:0-64K:oneshot");
  EXPECT_EQ(chosen(rules, Collective::AllReduce, 100), "oneshot");
  EXPECT_EQ(chosen(rules, Collective::AllReduce, 1 << 20), "ring");
  EXPECT_EQ(chosen(rules, Collective::Broadcast, 100), "ring");
}

TEST(AlgorithmRules, MalformedOnesNameTheBadPiece) {
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c : {
           Case{"rings", "unknown algorithm 'rings' (one of tree, oneshot, ring, hier, direct, peer-oneshot, peer)"},
           Case{"allreduce:0-64K:oneshtt", "rule 'allreduce:0-64K:oneshtt': unknown algorithm 'oneshtt'"},
           Case{"allreduse:ring", "rule 'allreduse:ring': 'allreduse' is not a collective (allreduce, allgather"},
           Case{"allreduse:0-1K:ring", "'allreduse' is not a collective"},
           Case{"allreduce:64Q-:ring", "size '64Q' in range '64Q-' is not a number of bytes"},
           Case{"allreduce:1K-1K:ring", "range '1K-1K' is empty"},
           Case{"allreduce:2K-1K:ring", "range '2K-1K' is empty"},
           Case{"allreduce:1K:ring", "range '1K' has no '-'"},
           Case{"allreduce:0-1K:4K-:ring", "rule 'allreduce:0-1K:4K-:ring' has 4 fields"},
           Case{"ring,,tree", "an empty rule"},
           Case{"ring,", "an empty rule"},
           Case{"allreduce:", "rule 'allreduce:': unknown algorithm ''"},
           Case{"allreduce:0-99999999999G:ring", "size '99999999999G'"},
           Case{"allreduce:-1K:ring", "size '' in range '-1K'"},
       }) {
    AlgorithmRules rules;
    const Status st = AlgorithmRules::parse(c.text, &rules);
    EXPECT_EQ(st.code(), loomInvalidArgument) << c.text;
    EXPECT_NE(st.message().find(c.says), std::string::npos) << c.text << ": " << st.message();
  }
}

// The size a rule's range is matched against: nccl-tests' size, every rank's block where it counts them.
TEST(AlgorithmRules, CallBytesAreNcclTestsSizes) {
  EXPECT_EQ(callBytes(Collective::AllReduce, 100, 4, 8), 400u);
  EXPECT_EQ(callBytes(Collective::Broadcast, 100, 2, 8), 200u);
  EXPECT_EQ(callBytes(Collective::Reduce, 100, 2, 8), 200u);
  for (Collective coll : {Collective::AllGather, Collective::ReduceScatter, Collective::AlltoAll, Collective::Gather,
                          Collective::Scatter})
    EXPECT_EQ(callBytes(coll, 100, 4, 8), 3200u) << collectiveName(coll);
  EXPECT_EQ(callBytes(Collective::AllGather, ~uint64_t{0} / 2, 4, 8), ~uint64_t{0}) << "saturates";
}

}  // namespace
}  // namespace loom
