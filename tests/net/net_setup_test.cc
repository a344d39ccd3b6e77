// The network setup (transport/net/net_setup.h, net_pairing.h): at init (LOOM_NET_CONNECT=eager) each rank
// receives the handles its network peers listen on for it, a message from each, not every rank's
// handles for every peer (an all-gather of n x n x channels handles); on first use (the default), none
// at init and only the peers a rank uses. Ranks are threads of this process, each on a host of its
// own, meeting through ThreadExchange, over the socket provider on loopback.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "thread_exchange.h"
#include "transport/transport_set.h"

namespace loom {
namespace {

constexpr int kRanks = 6;

// Every rank on a host of its own, over the socket provider on loopback.
TransportOptions loopbackOptions(bool eager) {
  TransportOptions options;
  options.netProvider = "socket";
  options.netDevice = "lo";
  options.timeoutMs = 20000;
  options.netConnectEager = eager;
  return options;
}

struct Ranks {
  ThreadExchange::Shared shared{kRanks};
  std::vector<std::unique_ptr<ThreadExchange>> exchanges;
  std::vector<std::unique_ptr<TransportSet>> sets{kRanks};
  std::vector<uint64_t> received = std::vector<uint64_t>(kRanks);  // by each rank at setup
};

// The ranks' transport sets, made at once as a communicator's init makes them.
void makeSets(const TransportOptions& options, Ranks* ranks) {
  std::vector<ProcessIdentity> peers;
  for (int r = 0; r < kRanks; ++r) peers.push_back({0x1000u + static_cast<uint64_t>(r), getpid(), 1, "host"});
  for (int r = 0; r < kRanks; ++r) ranks->exchanges.push_back(std::make_unique<ThreadExchange>(&ranks->shared, r));
  std::vector<Status> status(kRanks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank)
    threads.emplace_back([&, rank] {
      status[rank] = TransportSet::create(*ranks->exchanges[rank], peers, options, &ranks->sets[rank]);
      ranks->received[rank] = ranks->exchanges[rank]->bytesReceived();
    });
  for (std::thread& t : threads) t.join();
  for (int rank = 0; rank < kRanks; ++rank) ASSERT_TRUE(status[rank].ok()) << "rank " << rank << ": " << status[rank].message();
}

// A message from a to b on channel c, checked.
void carry(TransportSet& a, TransportSet& b, int c) {
  SendConnection* send = a.send(b.rank(), c);
  ASSERT_NE(send, nullptr);
  void* slot = nullptr;
  while ((slot = send->trySendBuffer()) == nullptr) std::this_thread::yield();
  const int value = 1000 * a.rank() + 10 * b.rank() + c;
  std::memcpy(slot, &value, sizeof value);
  ASSERT_TRUE(send->commitSend(sizeof value).ok());
  bool drained = false;
  while (!drained) ASSERT_TRUE(send->flush(&drained).ok());
  RecvConnection* recv = b.recv(a.rank(), c);
  ASSERT_NE(recv, nullptr);
  const void* data = nullptr;
  while (!data) ASSERT_TRUE(recv->tryRecv(sizeof value, &data).ok());
  int got = 0;
  std::memcpy(&got, data, sizeof got);
  EXPECT_EQ(got, value) << a.rank() << " -> " << b.rank() << " on channel " << c;
  recv->releaseRecv();
}

// Each rank connects to `peers(rank)` on its own thread, as an operation's waits do: Ok once all are up.
template <typename Peers>
std::vector<Status> connectAll(Ranks& ranks, Peers peers) {
  std::vector<Status> status(kRanks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank)
    threads.emplace_back([&, rank] {
      const std::vector<int> mine = peers(rank);
      for (bool all = false; !all && status[rank].ok();) {
        all = true;
        for (int q : mine) {
          bool up = false;
          status[rank] = ranks.sets[rank]->connectNet(q, &up);
          if (!status[rank].ok()) break;
          all = all && up;
        }
        if (!all) std::this_thread::yield();
      }
    });
  for (std::thread& t : threads) t.join();
  return status;
}

TEST(NetSetup, EachRankReceivesOnlyItsOwnHandles) {
  constexpr int n = kRanks;
  const TransportOptions options = loopbackOptions(true);
  Ranks ranks;
  makeSets(options, &ranks);
  const std::vector<uint64_t>& received = ranks.received;
  std::vector<std::unique_ptr<TransportSet>>& sets = ranks.sets;
  const int channels = options.nchannels + 1;  // the collectives' and the point-to-point one
  for (int rank = 0; rank < n; ++rank) {
    EXPECT_EQ(sets[rank]->openNetConnections(), 2 * (n - 1) * channels) << "rank " << rank;
    // The memory setup's all-gather of segment descriptors (at most 80 bytes each), three rounds of
    // 4-byte outcomes, and from each peer its provider's name (48 bytes) and its handles for this rank.
    const uint64_t bound = n * (80 + 3 * 4) + (n - 1) * (48 + channels * net::kHandleBytes);
    EXPECT_LE(received[rank], bound) << "rank " << rank;
  }
  // The connections carry messages both ways between every pair, on every channel.
  for (int c = 0; c < channels; ++c)
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b)
        if (a != b) carry(*sets[a], *sets[b], c);
}

// Connections on first use (the default): none at init, where every rank only agrees that every
// provider started (4 bytes each); then a ring's ranks connect to their two neighbours only, every
// channel both ways, and the connections carry messages.
TEST(NetSetup, ConnectionsOnFirstUseReachOnlyThePeersUsed) {
  const TransportOptions options = loopbackOptions(false);
  Ranks ranks;
  makeSets(options, &ranks);
  const int channels = options.nchannels + 1;
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_EQ(ranks.sets[rank]->openNetConnections(), 0) << "rank " << rank;
    EXPECT_LE(ranks.received[rank], static_cast<uint64_t>(kRanks * (80 + 4))) << "rank " << rank;
    EXPECT_EQ(ranks.sets[rank]->send((rank + 1) % kRanks, 0), nullptr);
  }
  auto neighbours = [](int rank) { return std::vector<int>{(rank + 1) % kRanks, (rank + kRanks - 1) % kRanks}; };
  const std::vector<Status> status = connectAll(ranks, neighbours);
  for (int rank = 0; rank < kRanks; ++rank) {
    ASSERT_TRUE(status[rank].ok()) << "rank " << rank << ": " << status[rank].message();
    EXPECT_EQ(ranks.sets[rank]->openNetConnections(), 2 * 2 * channels) << "rank " << rank;
  }
  for (int c = 0; c < channels; ++c)
    for (int a = 0; a < kRanks; ++a) {
      carry(*ranks.sets[a], *ranks.sets[(a + 1) % kRanks], c);
      carry(*ranks.sets[(a + 1) % kRanks], *ranks.sets[a], c);
    }
}

// A receive from any rank does not know whom to offer: the rank answers the peers that asked.
TEST(NetSetup, ARankThatDoesNotKnowItsPeerAnswersTheOneThatAsks) {
  Ranks ranks;
  makeSets(loopbackOptions(false), &ranks);
  std::atomic<bool> senderUp{false};
  Status sender, receiver;
  std::thread asking([&] {
    bool up = false;
    while (sender.ok() && !up) {
      sender = ranks.sets[4]->connectNet(1, &up);
      std::this_thread::yield();
    }
    senderUp = true;
  });
  while (receiver.ok() && !senderUp) {
    receiver = ranks.sets[1]->answerNetPeers();
    std::this_thread::yield();
  }
  asking.join();
  ASSERT_TRUE(sender.ok()) << sender.message();
  ASSERT_TRUE(receiver.ok()) << receiver.message();
  bool up = false;
  for (int i = 0; i < 1000 && receiver.ok() && !up; ++i) receiver = ranks.sets[1]->connectNet(4, &up);
  EXPECT_TRUE(up);
  carry(*ranks.sets[4], *ranks.sets[1], 0);
  EXPECT_EQ(ranks.sets[1]->openNetConnections(), ranks.sets[4]->openNetConnections());
}

// A rank that fails tells the peers whose connections are under way, which fail naming it and its reason.
TEST(NetSetup, APeerThatFailsBeforeAnsweringIsNamed) {
  Ranks ranks;
  makeSets(loopbackOptions(false), &ranks);
  bool up = false;
  ASSERT_TRUE(ranks.sets[2]->connectNet(5, &up).ok());  // rank 2 asked; rank 5 never answers, it fails
  EXPECT_FALSE(up);
  ranks.sets[5]->markFailed("rank 5 ran out of memory (a test)", true);
  Status st;
  for (int i = 0; i < 100000 && st.ok() && !up; ++i) st = ranks.sets[2]->connectNet(5, &up);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("rank 5"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("ran out of memory (a test)"), std::string::npos) << st.message();
}

// The same once the pair is under way on both sides: rank 0 answered rank 3's offer and started
// connecting, then failed; rank 3, connecting, fails naming it instead of waiting for connections that
// will not come.
TEST(NetSetup, APeerThatFailsWhileConnectingIsNamed) {
  Ranks ranks;
  makeSets(loopbackOptions(false), &ranks);
  bool up = false;
  ASSERT_TRUE(ranks.sets[3]->connectNet(0, &up).ok());  // rank 3 offers
  ASSERT_TRUE(ranks.sets[0]->answerNetPeers().ok());     // rank 0 offers back, takes 3's, starts connecting
  ranks.sets[0]->markFailed("rank 0 lost its GPU (a test)", true);
  Status st;
  for (int i = 0; i < 100000 && st.ok() && !up; ++i) st = ranks.sets[3]->connectNet(0, &up);
  EXPECT_FALSE(up);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("rank 0"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("lost its GPU (a test)"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace loom
