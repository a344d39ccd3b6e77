// Peer-memory plans (peer_memory.cc): proven by the verifier for 1..8 ranks, both layouts, awkward
// counts and several channels; the verifier's own rules for them (a peer's memory touched only between
// a lane's first and last Meet, accesses of different ranks ordered by a Meet, every rank meeting)
// each caught on a broken plan; and the tuner offering them only where ranks share memory.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "algorithms/builders.h"
#include "algorithms/machine_model.h"
#include "algorithms/registry.h"
#include "algorithms/tuner.h"
#include "algorithms/verifier.h"

namespace loom {
namespace {

PlanRequest peerRequest(Collective coll, int n, uint64_t count, int channels, int root = 0, size_t elemSize = 4) {
  PlanRequest req;
  req.coll = coll;
  req.nranks = n;
  req.root = root;
  req.count = count;
  req.elemSize = elemSize;
  req.chunkElems = 1 << 16;
  req.nchannels = channels;
  req.peerMemory = true;
  return req;
}

TEST(PeerMemory, VerifiesEveryShape) {
  const Collective colls[] = {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather,
                              Collective::Broadcast};
  for (int n = 1; n <= kMaxPeerMemoryRanks; ++n) {
    for (uint64_t count : {0, 1, 2, 3, 7, 13, 97, 1000, 4099}) {
      if (count > 1000 && n > 4) continue;  // the symbolic memory's time grows with n^2 x count
      for (int channels : {1, 3, 4}) {
        for (size_t elemSize : {size_t{2}, size_t{4}}) {
          if (elemSize == 2 && count > 97) continue;
          for (Collective coll : colls) {
            for (int root : {0, n - 1}) {
              if (root != 0 && coll != Collective::Broadcast) continue;
              const PlanRequest req = peerRequest(coll, n, count, channels, root, elemSize);
              const Status st = verifyAlgorithm(Algorithm::PeerMemory, req);
              ASSERT_TRUE(st.ok()) << "peer " << collectiveName(coll) << " n=" << n << " count=" << count
                                   << " channels=" << channels << " root=" << root << ": " << st.message();
            }
          }
          const Status st = verifyAlgorithm(Algorithm::PeerOneShot, peerRequest(Collective::AllReduce, n, count, channels));
          ASSERT_TRUE(st.ok()) << "peer-oneshot n=" << n << " count=" << count << " channels=" << channels << ": "
                               << st.message();
        }
      }
    }
  }
}

TEST(PeerMemory, EveryLaneMeetsTwiceAndNothingIsAMessage) {
  std::vector<Plan> plans;
  ASSERT_TRUE(buildPlansForAllRanks(Algorithm::PeerMemory, peerRequest(Collective::AllReduce, 4, 10, 4), &plans).ok());
  for (const Plan& plan : plans) {
    EXPECT_EQ(plan.maxMessageElems, 0u);
    EXPECT_EQ(plan.lanes.size(), 4u);  // channels with no elements of this rank's block still meet
    for (const Lane& lane : plan.lanes) {
      int meets = 0;
      for (const Step& s : lane.steps) {
        meets += s.kind == StepKind::Meet;
        EXPECT_EQ(s.sendPeer, -1);
        EXPECT_EQ(s.recvPeer, -1);
      }
      EXPECT_EQ(meets, 2);
      EXPECT_EQ(lane.steps.front().kind, StepKind::Meet);
    }
  }
}

TEST(PeerMemory, RefusedWithoutSharedMemory) {
  PlanRequest req = peerRequest(Collective::AllReduce, 2, 100, 1);
  req.peerMemory = false;
  Plan plan;
  const Status st = buildPeerPlan(req, &plan);
  EXPECT_EQ(st.code(), loomInvalidArgument);
  EXPECT_NE(st.message().find("address each other's buffers"), std::string::npos) << st.message();
  req = peerRequest(Collective::AllReduce, kMaxPeerMemoryRanks + 1, 100, 1);
  EXPECT_EQ(buildPeerOneShotPlan(req, &plan).code(), loomInvalidArgument);
  EXPECT_EQ(buildPeerPlan(peerRequest(Collective::AlltoAll, 2, 100, 1), &plan).code(), loomInvalidArgument);
}

// The verifier's rules for peer memory, each broken once.
class BrokenPeerPlan : public ::testing::Test {
 protected:
  void build(Algorithm algo, Collective coll, int n, uint64_t count) {
    req_ = peerRequest(coll, n, count, 1);
    ASSERT_TRUE(buildPlansForAllRanks(algo, req_, &plans_).ok());
  }
  std::string failure(bool inPlace) {
    const Status st = verifyPlansInLayout(req_, plans_, inPlace);
    EXPECT_FALSE(st.ok());
    return st.message();
  }
  std::vector<Step>& steps(int rank) { return plans_[rank].lanes[0].steps; }
  PlanRequest req_;
  std::vector<Plan> plans_;
};

TEST_F(BrokenPeerPlan, PeerMemoryBeforeTheFirstMeet) {
  build(Algorithm::PeerMemory, Collective::AllGather, 3, 8);
  steps(1).erase(steps(1).begin());  // rank 1 writes into its peers' outputs without meeting first
  steps(1).push_back(Step{StepKind::Meet});
  EXPECT_NE(failure(false).find("before its lane's first Meet"), std::string::npos) << failure(false);
}

TEST_F(BrokenPeerPlan, PeerMemoryAfterTheLastMeet) {
  build(Algorithm::PeerMemory, Collective::AllReduce, 2, 8);
  std::swap(steps(0)[1], steps(0)[2]);  // rank 0 reduces after the closing Meet
  EXPECT_NE(failure(false).find("after its lane's last Meet"), std::string::npos) << failure(false);
}

TEST_F(BrokenPeerPlan, InPlaceOneShotWithoutScratchRaces) {
  build(Algorithm::PeerOneShot, Collective::AllReduce, 3, 8);
  // Reduce straight into recv: in place, recv is the input the other ranks read at the same time.
  for (int r = 0; r < 3; ++r) {
    steps(r)[1].dst = BufRef{kRecvBuffer, 0};
    steps(r).pop_back();  // the copy out of scratch
    plans_[r].scratchElems = 0;
  }
  EXPECT_TRUE(verifyPlansInLayout(req_, plans_, false).ok());
  const std::string why = failure(true);
  EXPECT_NE(why.find("no Meet orders the two"), std::string::npos) << why;
}

TEST_F(BrokenPeerPlan, AMissingMeetDeadlocks) {
  build(Algorithm::PeerMemory, Collective::Broadcast, 3, 8);
  steps(2).push_back(Step{StepKind::Meet});  // rank 2 waits in a third Meet the others never come to
  const std::string why = failure(false);
  EXPECT_NE(why.find("deadlock: waits in Meet"), std::string::npos) << why;
}

TEST_F(BrokenPeerPlan, NoMessagesBesidePeerMemory) {
  build(Algorithm::PeerMemory, Collective::AllGather, 2, 8);
  Step send;
  send.kind = StepKind::Send;
  send.sendPeer = 1;
  send.src = BufRef{kSendBuffer, 0};
  send.count = 8;
  Step recv;
  recv.kind = StepKind::Recv;
  recv.recvPeer = 0;
  recv.dst = BufRef{kRecvBuffer, 0};
  recv.count = 8;
  steps(0).push_back(send);
  steps(1).push_back(recv);
  for (Plan& p : plans_) p.maxMessageElems = 8;
  EXPECT_NE(failure(false).find("exchange messages too"), std::string::npos) << failure(false);
}

// The device machine of rank threads sharing a GPU: the tuner takes peer-memory plans where the model
// says they win, and never without shared memory. (The model has them win at every size: at 8 B two
// Meets and one step against the FIFO one-shot's messages; at 256 MiB two-shot's reads and writes
// cross the ports once, where a ring's steps copy every byte through a slot. peer-oneshot's copy out of
// scratch makes it lose to two-shot in the model: it is there to be forced, LOOM_ALGO=peer-oneshot.)
TEST(PeerMemory, TunerChoosesThemWhereRanksShareMemory) {
  for (int n : {2, 4}) {
    MachineModel m = defaultMachine(n, 0);
    m.lanesInParallel = true;
    m.copyGbs = kDeviceLaneGbs;
    m.intraGbs = kGpuCopyGbsUnknown / n;
    m.intraLatencyUs = 1.0;
    m.stepUs = 0.5;
    m.launchUs = 4.0;
    m.fifoSlots = 8;
    for (bool peer : {false, true}) {
      m.peerMemory = peer;
      Tuner tuner(m);
      for (uint64_t bytes : {uint64_t{8}, uint64_t{256} << 20}) {
        TuneRequest req;
        req.coll = Collective::AllReduce;
        req.count = bytes / 4;
        req.elemSize = 4;
        req.slotBytes = 512 << 10;
        req.maxChannels = 32;
        TuneChoice choice;
        ASSERT_TRUE(tuner.choosePlan(req, &choice).ok());
        const bool isPeer = choice.algorithm == Algorithm::PeerOneShot || choice.algorithm == Algorithm::PeerMemory;
        SCOPED_TRACE(testing::Message() << n << " ranks, " << bytes << " B: " << algorithmName(choice.algorithm));
        if (!peer) {
          EXPECT_FALSE(isPeer);
        } else if (bytes > 8) {
          EXPECT_EQ(choice.algorithm, Algorithm::PeerMemory);
        } else {
          EXPECT_TRUE(isPeer);
        }
      }
    }
  }
}

}  // namespace
}  // namespace loom
