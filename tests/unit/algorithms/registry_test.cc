// The algorithm registry: every entry named, found by its name in any case, and its serves() true
// exactly where its builder succeeds, over a sweep of collectives, rank counts, node shapes, counts and
// chunks; tried() within serves(); LOOM_ALGO's declared words the registry's.
#include <gtest/gtest.h>

#include <cctype>
#include <set>
#include <string>

#include "algorithms/collective_words.h"
#include "algorithms/registry.h"
#include "base/settings.h"

namespace loom {
namespace {

TEST(Registry, EveryEntryIsNamedAndItsNameParsesBack) {
  std::set<std::string> names;
  std::set<int> ids;
  for (const AlgorithmEntry& entry : algorithmRegistry()) {
    SCOPED_TRACE(entry.name);
    EXPECT_TRUE(names.insert(entry.name).second) << "two entries of one name";
    EXPECT_TRUE(ids.insert(static_cast<int>(entry.id)).second) << "two entries of one algorithm";
    EXPECT_EQ(&algorithmEntry(entry.id), &entry);
    EXPECT_STREQ(algorithmName(entry.id), entry.name);
    Algorithm parsed = Algorithm::Ring;
    ASSERT_TRUE(parseAlgorithmName(entry.name, &parsed));
    EXPECT_EQ(parsed, entry.id);
    std::string upper = entry.name;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    ASSERT_EQ(findAlgorithm(upper), &entry) << "names are read in any case";
    EXPECT_NE(algorithmNames().find(entry.name), std::string::npos);
    EXPECT_GT(std::string(entry.description).size(), 20u);
    EXPECT_NE(entry.build, nullptr);
    EXPECT_NE(entry.serves, nullptr);
    EXPECT_NE(entry.tried, nullptr);
    EXPECT_NE(entry.alignment, nullptr);
  }
  EXPECT_EQ(names.size(), std::size(kAllAlgorithms));
  for (Algorithm a : kAllAlgorithms) EXPECT_TRUE(ids.count(static_cast<int>(a))) << static_cast<int>(a);
  EXPECT_EQ(findAlgorithm("rings"), nullptr);
  EXPECT_EQ(findAlgorithm(""), nullptr);
}

// The settings table cannot ask the registry (base is below algorithms): its LOOM_ALGO hint must name
// every algorithm there is.
TEST(Registry, LoomAlgoDeclaresEveryName) {
  const std::string allowed = specOf(Setting::Algo).allowed;
  for (const AlgorithmEntry& entry : algorithmRegistry())
    EXPECT_NE(allowed.find(entry.name), std::string::npos) << entry.name << " is missing from settings.def: " << allowed;
}

TEST(Registry, CollectiveWordsParseBack) {
  for (Collective c : kWordedCollectives) {
    Collective parsed = Collective::SendRecv;
    ASSERT_TRUE(parseCollectiveWord(collectiveWord(c), &parsed)) << collectiveWord(c);
    EXPECT_EQ(parsed, c);
  }
  Collective parsed = Collective::SendRecv;
  EXPECT_TRUE(parseCollectiveWord("All_Reduce", &parsed));
  EXPECT_EQ(parsed, Collective::AllReduce);
  EXPECT_TRUE(parseCollectiveWord("reduce_scatter", &parsed));
  EXPECT_EQ(parsed, Collective::ReduceScatter);
  EXPECT_FALSE(parseCollectiveWord("sendrecv", &parsed));
  EXPECT_FALSE(parseCollectiveWord("all-reduce", &parsed));
  EXPECT_FALSE(parseCollectiveWord("", &parsed));
}

// serves() is the builder's verdict, as a predicate, for every valid request of the sweep; tried()
// never exceeds it; an entry's own collectives are served somewhere.
TEST(Registry, ServesAgreesWithTheBuilder) {
  for (const AlgorithmEntry& entry : algorithmRegistry()) {
    SCOPED_TRACE(entry.name);
    int served = 0, refused = 0;
    std::set<Collective> servedCollectives;
    for (Collective coll : kWordedCollectives) {
      for (int n : {1, 2, 3, 4, 6}) {
        for (int rpn : {0, 1, 2, 3, n}) {
          for (uint64_t count : {0, 1, 7, 300}) {
            for (uint64_t chunk : {1, 8, 512}) {
              for (int channels : {1, 3}) {
                for (int rank : {0, n - 1}) {
                  for (bool peerMemory : {false, true}) {
                    PlanRequest req;
                    req.peerMemory = peerMemory;
                    req.coll = coll;
                    req.nranks = n;
                    req.rank = rank;
                    req.root = n - 1 - rank;
                    req.count = count;
                    req.elemSize = 4;
                    req.chunkElems = chunk;
                    req.nchannels = channels;
                    req.ranksPerNode = rpn;
                    Plan plan;
                    const Status built = entry.build(req, &plan);
                    ASSERT_EQ(entry.serves(req), built.ok())
                        << collectiveName(coll) << " n " << n << " rpn " << rpn << " count " << count << " chunk "
                        << chunk << " channels " << channels << " rank " << rank << ": " << built.message();
                    if (!built.ok()) {
                      EXPECT_EQ(built.code(), loomInvalidArgument) << built.message();
                      EXPECT_NE(built.message().find(entry.name), std::string::npos)
                          << "a refusal names its algorithm: " << built.message();
                    }
                    if (entry.tried(req)) {
                      EXPECT_TRUE(built.ok()) << "tried where it cannot build";
                    }
                    if (built.ok()) {
                      ++served;
                      servedCollectives.insert(coll);
                    } else {
                      ++refused;
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
    EXPECT_GT(served, 0);
    for (Collective coll : kWordedCollectives) {
      if (entry.collectives.has(coll)) {
        EXPECT_TRUE(servedCollectives.count(coll)) << collectiveName(coll);
      }
    }
    // Every algorithm but the two that serve everything refuses somewhere in the sweep: the sweep
    // reaches the edges of what each serves.
    if (entry.id != Algorithm::Ring && entry.id != Algorithm::Direct) {
      EXPECT_GT(refused, 0);
    }
  }
}

}  // namespace
}  // namespace loom
