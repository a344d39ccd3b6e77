// The tuner: latency-bound algorithms for small messages at scale, rings for large ones, the
// hierarchy on slow NICs; overrides honoured; the communicator's limits respected; decisions cached.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "algorithms/collective_words.h"
#include "algorithms/registry.h"
#include "algorithms/tuner.h"

namespace loom {
namespace {

MachineModel singleNode(int n) {
  MachineModel m = defaultMachine(n, 0);
  m.intraGbs = 50;
  m.intraLatencyUs = 2;
  return m;
}

TuneRequest request(Collective coll, uint64_t bytes, int maxChannels = 8) {
  TuneRequest req;
  req.coll = coll;
  req.elemSize = 4;
  req.count = bytes / 4;
  req.slotBytes = 256 << 10;
  req.maxChannels = maxChannels;
  return req;
}

// (At a few dozen ranks direct plans compete too: with fewer elements than ranks only a couple of
// ranks own data, two hops away from everyone.)
TEST(Tuner, SmallMessagesAtManyRanksAvoidTheRing) {
  for (int n : {128, 256}) {
    Tuner tuner(singleNode(n));
    for (uint64_t bytes : {8, 256, 4096}) {
      TuneChoice choice;
      ASSERT_TRUE(tuner.choosePlan(request(Collective::AllReduce, bytes), &choice).ok());
      EXPECT_TRUE(choice.algorithm == Algorithm::Tree || choice.algorithm == Algorithm::OneShot)
          << n << " ranks, " << bytes << " bytes: " << algorithmName(choice.algorithm);
      TuneChoice ring = choice;
      ring.algorithm = Algorithm::Ring;
      ring.nchannels = 1;
      double ringUs = 0;
      ASSERT_TRUE(tuner.predict(request(Collective::AllReduce, bytes), ring, &ringUs).ok());
      EXPECT_LT(choice.predictedUs * 2, ringUs) << n << " ranks, " << bytes << " bytes";
    }
    // Broadcast and Reduce have trees too.
    for (Collective coll : {Collective::Broadcast, Collective::Reduce}) {
      TuneChoice choice;
      ASSERT_TRUE(tuner.choosePlan(request(coll, 64), &choice).ok());
      EXPECT_EQ(choice.algorithm, Algorithm::Tree) << collectiveName(coll);
    }
  }
}

TEST(Tuner, LargeMessagesTakeTheRing) {
  Tuner tuner(singleNode(16));
  for (uint64_t mib : {64, 1024}) {
    TuneChoice choice;
    ASSERT_TRUE(tuner.choosePlan(request(Collective::AllReduce, mib << 20), &choice).ok());
    EXPECT_EQ(choice.algorithm, Algorithm::Ring) << mib << " MiB";
    // Within a few percent of nccl-tests' bound S/B * 2(n-1)/n.
    const double bound = static_cast<double>(mib << 20) / (50 * 1e3) * 2 * 15 / 16;
    EXPECT_LE(choice.predictedUs, bound * 1.05);
    EXPECT_GE(choice.predictedUs, bound * 0.999);
  }
}

TEST(Tuner, HierarchyWinsOnSlowNics) {
  MachineModel m = defaultMachine(32, 8);
  m.intraGbs = 200;
  m.nicsPerNode = 8;
  m.nicGbs = 5;
  Tuner tuner(m);
  TuneChoice choice;
  ASSERT_TRUE(tuner.choosePlan(request(Collective::AllReduce, 256 << 20), &choice).ok());
  EXPECT_EQ(choice.algorithm, Algorithm::Hierarchical);
  // Single node: no hierarchy to use.
  Tuner flat(singleNode(32));
  ASSERT_TRUE(flat.choosePlan(request(Collective::AllReduce, 256 << 20), &choice).ok());
  EXPECT_NE(choice.algorithm, Algorithm::Hierarchical);
}

TEST(Tuner, RingsSpreadOverRailsAcrossNodes) {
  MachineModel m = defaultMachine(16, 4);
  m.nicsPerNode = 4;
  Tuner tuner(m);
  TuneRequest req = request(Collective::AllGather, 64 << 20);
  req.forcedAlgorithm = Algorithm::Ring;
  req.forcedChannels = 4;
  TuneChoice choice;
  ASSERT_TRUE(tuner.choosePlan(req, &choice).ok());
  ASSERT_EQ(choice.rings.size(), 4u);
  const PlanRequest pr = tuner.planRequest(req, choice, 3);
  EXPECT_EQ(pr.rings, choice.rings);
  EXPECT_EQ(pr.ranksPerNode, 4);
  EXPECT_EQ(pr.rank, 3);
  Plan plan;
  EXPECT_TRUE(buildPlan(choice.algorithm, pr, &plan).ok());
}

TEST(Tuner, OverridesAreHonoured) {
  Tuner tuner(singleNode(8));
  for (Algorithm algo : {Algorithm::Ring, Algorithm::Tree, Algorithm::Direct, Algorithm::OneShot}) {
    TuneRequest req = request(Collective::AllReduce, 4096);
    req.forcedAlgorithm = algo;
    TuneChoice choice;
    ASSERT_TRUE(tuner.choosePlan(req, &choice).ok());
    EXPECT_EQ(choice.algorithm, algo);
    EXPECT_TRUE(choice.note.empty()) << choice.note;
  }
  TuneRequest req = request(Collective::AllReduce, 1 << 20, 4);
  req.forcedChunkBytes = 8192;
  req.forcedChannels = 3;
  TuneChoice choice;
  ASSERT_TRUE(tuner.choosePlan(req, &choice).ok());
  EXPECT_EQ(choice.chunkElems, 2048u);
  EXPECT_EQ(choice.nchannels, 3);
  // Clamped to what the communicator has.
  req.forcedChunkBytes = 64 << 20;
  req.forcedChannels = 99;
  ASSERT_TRUE(tuner.choosePlan(req, &choice).ok());
  EXPECT_EQ(choice.chunkElems, (256u << 10) / 4);
  EXPECT_EQ(choice.nchannels, 4);
}

TEST(Tuner, ForcedAlgorithmsThatCannotServeFallBackWithANote) {
  Tuner tuner(singleNode(8));
  struct Case {
    Collective coll;
    uint64_t bytes;
    Algorithm forced;
  };
  for (const Case& c : {Case{Collective::AllGather, 4096, Algorithm::Tree},
                        Case{Collective::AllReduce, 64 << 20, Algorithm::OneShot},
                        Case{Collective::AllReduce, 4096, Algorithm::Hierarchical}}) {
    TuneRequest req = request(c.coll, c.bytes);
    req.forcedAlgorithm = c.forced;
    TuneChoice choice;
    ASSERT_TRUE(tuner.choosePlan(req, &choice).ok());
    EXPECT_NE(choice.algorithm, c.forced);
    EXPECT_NE(choice.note.find(algorithmName(c.forced)), std::string::npos) << choice.note;
  }
}

// The tuner's candidates are the registry's entries that would be tried, in the registry's order, and
// what it chooses is one of them.
TEST(Tuner, CandidatesAreTheRegistrys) {
  MachineModel twoNodes = defaultMachine(8, 4);
  twoNodes.nicsPerNode = 4;
  for (const MachineModel& m : {singleNode(8), twoNodes}) {
    Tuner tuner(m);
    for (Collective coll : kWordedCollectives) {
      for (uint64_t bytes : {uint64_t{64}, uint64_t{1} << 20}) {
        const TuneRequest req = request(coll, bytes);
        const std::vector<Algorithm> candidates = tuner.candidates(req, req.count);
        TuneChoice probe;
        probe.chunkElems = req.slotBytes / req.elemSize;
        const PlanRequest pr = tuner.planRequest(req, probe, 0);
        std::vector<Algorithm> expected;
        for (const AlgorithmEntry& entry : algorithmRegistry())
          if (entry.tried(pr)) expected.push_back(entry.id);
        EXPECT_EQ(candidates, expected) << collectiveName(coll) << " " << bytes;
        TuneChoice choice;
        ASSERT_TRUE(tuner.choosePlan(req, &choice).ok());
        EXPECT_NE(std::find(candidates.begin(), candidates.end(), choice.algorithm), candidates.end())
            << collectiveName(coll) << " " << bytes << ": " << algorithmName(choice.algorithm);
      }
    }
  }
  // What that means for a few shapes (the list the tuner had before the registry).
  auto names = [](const std::vector<Algorithm>& algos) {
    std::string s;
    for (Algorithm a : algos) s += (s.empty() ? "" : ",") + std::string(algorithmName(a));
    return s;
  };
  Tuner flat(singleNode(8));
  Tuner nodes(twoNodes);
  const TuneRequest small = request(Collective::AllReduce, 4096);
  EXPECT_EQ(names(nodes.candidates(small, small.count)), "tree,oneshot,ring,hier,direct");
  EXPECT_EQ(names(flat.candidates(small, small.count)), "tree,oneshot,ring,direct");
  const TuneRequest large = request(Collective::AllReduce, 64 << 20);
  EXPECT_EQ(names(flat.candidates(large, large.count)), "tree,ring,direct");
  const TuneRequest gather = request(Collective::AllGather, 4096);
  EXPECT_EQ(names(nodes.candidates(gather, gather.count)), "ring,direct");
  const TuneRequest bcast = request(Collective::Broadcast, 4096);
  EXPECT_EQ(names(nodes.candidates(bcast, bcast.count)), "tree,ring,direct");
  for (Collective personalized : {Collective::AlltoAll, Collective::Gather, Collective::Scatter}) {
    const TuneRequest r = request(personalized, 4096);
    EXPECT_EQ(names(nodes.candidates(r, r.count)), "direct");
  }
}

TEST(Tuner, ChoicesFitTheCommunicator) {
  MachineModel m = defaultMachine(24, 8);
  m.nicsPerNode = 2;
  Tuner tuner(m);
  for (Collective coll : {Collective::AllReduce, Collective::Broadcast, Collective::Reduce, Collective::AllGather,
                          Collective::ReduceScatter, Collective::AlltoAll, Collective::Gather, Collective::Scatter}) {
    for (uint64_t bytes = 4; bytes <= (uint64_t{1} << 28); bytes *= 64) {
      TuneRequest req = request(coll, bytes, 3);
      req.slotBytes = 64 << 10;
      req.root = 5;
      TuneChoice choice;
      ASSERT_TRUE(tuner.choosePlan(req, &choice).ok()) << collectiveName(coll) << " " << bytes;
      EXPECT_LE(choice.chunkElems * req.elemSize, req.slotBytes);
      EXPECT_GE(choice.chunkElems, 1u);
      EXPECT_LE(choice.nchannels, 3);
      EXPECT_GE(choice.nchannels, 1);
      Plan plan;
      const Status st = buildPlan(choice.algorithm, tuner.planRequest(req, choice, 7), &plan);
      EXPECT_TRUE(st.ok()) << collectiveName(coll) << " " << bytes << ": " << st.message();
    }
  }
}

// On host memory the model alone would split a 1 MiB allreduce over two channels (measured slower: a
// rank interleaving lanes pays for it); minChannelBytes keeps such operations on one channel, unless
// the user forces more, and leaves large ones free to use both.
TEST(Tuner, ExtraChannelsOnlyForOperationsLargeEnough) {
  MachineModel host = hostMemoryMachine(2, 0);
  MachineModel unlimited = host;
  unlimited.minChannelBytes = 0;
  auto channelsFor = [](const MachineModel& m, uint64_t bytes, int forced) {
    Tuner tuner(m);
    TuneRequest req = request(Collective::AllReduce, bytes, 2);
    req.slotBytes = 128 << 10;
    req.forcedChannels = forced;
    TuneChoice choice;
    EXPECT_TRUE(tuner.choosePlan(req, &choice).ok());
    return choice.nchannels;
  };
  EXPECT_EQ(channelsFor(unlimited, 1 << 20, 0), 2);  // what the rule is for
  EXPECT_EQ(channelsFor(host, 1 << 20, 0), 1);
  EXPECT_EQ(channelsFor(host, 1 << 20, 2), 2);   // LOOM_NCHANNELS wins
  EXPECT_EQ(channelsFor(host, 256u << 20, 0), 2);  // 128 MiB per channel
}

TEST(Tuner, PredictedTimeNeverDecreasesWithSize) {
  MachineModel m = defaultMachine(64, 8);
  m.intraGbs = 200;
  m.nicsPerNode = 8;
  m.nicGbs = 25;
  Tuner tuner(m);
  double previous = 0;
  for (uint64_t bytes = 8; bytes <= (uint64_t{1} << 32); bytes *= 2) {
    const TuneRequest req = request(Collective::AllReduce, bytes, 16);
    TuneChoice choice;
    ASSERT_TRUE(tuner.choosePlan(req, &choice).ok());
    double us = 0;
    ASSERT_TRUE(tuner.predict(req, choice, &us).ok());
    EXPECT_GE(us, previous * 0.999) << bytes << " bytes (" << algorithmName(choice.algorithm) << ")";
    previous = us;
  }
}

TEST(Tuner, DecisionsAreCachedPerSizeClass) {
  Tuner tuner(singleNode(64));
  TuneChoice first, again;
  ASSERT_TRUE(tuner.choosePlan(request(Collective::AllReduce, 3000), &first).ok());
  const auto start = std::chrono::steady_clock::now();
  constexpr int kCalls = 2000;
  for (int i = 0; i < kCalls; ++i) {
    // 2049..4096 bytes: one class.
    ASSERT_TRUE(tuner.choosePlan(request(Collective::AllReduce, 2052 + 4 * (i % 500)), &again).ok());
    EXPECT_EQ(again.algorithm, first.algorithm);
  }
  const double perCallUs =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / kCalls;
  EXPECT_LT(perCallUs, 100.0);
  EXPECT_EQ(sizeClass(4096), 12);
  EXPECT_EQ(sizeClass(4097), 13);
  EXPECT_EQ(sizeClass(1), 0);
}

TEST(Tuner, TrivialOperations) {
  Tuner tuner(singleNode(4));
  TuneChoice choice;
  ASSERT_TRUE(tuner.choosePlan(request(Collective::AllReduce, 0), &choice).ok());
  EXPECT_EQ(choice.nchannels, 1);
  ASSERT_TRUE(tuner.choosePlan(request(Collective::AlltoAll, 0), &choice).ok());
  EXPECT_EQ(choice.algorithm, Algorithm::Direct);
  Tuner single(singleNode(1));
  ASSERT_TRUE(single.choosePlan(request(Collective::AllReduce, 1 << 20), &choice).ok());
  TuneRequest bad = request(Collective::AllReduce, 64);
  bad.elemSize = 0;
  EXPECT_EQ(tuner.choosePlan(bad, &choice).code(), loomInvalidArgument);
}

}  // namespace
}  // namespace loom
