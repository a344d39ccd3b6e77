// The network setup's handle exchange (transport/net/net_setup.h): each rank receives the handles its
// network peers listen on for it, a message from each, not every rank's handles for every peer (an
// all-gather of n x n x channels handles). Ranks are threads of this process, each on a host of its
// own, meeting through ThreadExchange, over the socket provider on loopback.
#include <gtest/gtest.h>

#include <unistd.h>

#include <thread>
#include <vector>

#include "thread_exchange.h"
#include "transport/transport_set.h"

namespace loom {
namespace {

TEST(NetSetup, EachRankReceivesOnlyItsOwnHandles) {
  constexpr int n = 6;
  std::vector<ProcessIdentity> peers;
  for (int r = 0; r < n; ++r) peers.push_back({0x1000u + static_cast<uint64_t>(r), getpid(), 1, "host"});
  TransportOptions options;
  options.netProvider = "socket";
  options.netDevice = "lo";
  options.timeoutMs = 20000;
  ThreadExchange::Shared shared(n);
  std::vector<Status> status(n);
  std::vector<uint64_t> received(n);
  std::vector<std::unique_ptr<TransportSet>> sets(n);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank)
    threads.emplace_back([&, rank] {
      ThreadExchange exchange(&shared, rank);
      status[rank] = TransportSet::create(exchange, peers, options, &sets[rank]);
      received[rank] = exchange.bytesReceived();
    });
  for (std::thread& t : threads) t.join();
  const int channels = options.nchannels + 1;  // the collectives' and the point-to-point one
  for (int rank = 0; rank < n; ++rank) {
    ASSERT_TRUE(status[rank].ok()) << "rank " << rank << ": " << status[rank].message();
    EXPECT_EQ(sets[rank]->openNetConnections(), 2 * (n - 1) * channels) << "rank " << rank;
    // The memory setup's all-gather of segment descriptors (at most 80 bytes each), two rounds of
    // 4-byte outcomes, and from each peer its provider's name (48 bytes) and its handles for this rank.
    const uint64_t bound = n * (80 + 2 * 4) + (n - 1) * (48 + channels * net::kHandleBytes);
    EXPECT_LE(received[rank], bound) << "rank " << rank;
  }
  // The connections carry messages both ways between every pair, on every channel.
  for (int c = 0; c < channels; ++c)
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b) {
        if (a == b) continue;
        SendConnection* send = sets[a]->send(b, c);
        ASSERT_NE(send, nullptr);
        void* slot = nullptr;
        while ((slot = send->trySendBuffer()) == nullptr) std::this_thread::yield();
        const int value = 1000 * a + 10 * b + c;
        std::memcpy(slot, &value, sizeof value);
        ASSERT_TRUE(send->commitSend(sizeof value).ok());
        bool drained = false;
        while (!drained) ASSERT_TRUE(send->flush(&drained).ok());
        RecvConnection* recv = sets[b]->recv(a, c);
        const void* data = nullptr;
        while (!data) ASSERT_TRUE(recv->tryRecv(sizeof value, &data).ok());
        int got = 0;
        std::memcpy(&got, data, sizeof got);
        EXPECT_EQ(got, value) << a << " -> " << b << " on channel " << c;
        recv->releaseRecv();
      }
}

}  // namespace
}  // namespace loom
