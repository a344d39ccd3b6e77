// TransportSet's GPUDirect RDMA decision as setup wires it (the decision itself: gdr_choice_test.cc).
// Two ranks on different hosts over the socket provider: the one with a GPU (TransportOptions::
// cudaDevice 0, as the communicator fills it; no GPU is touched here) is decided staged because the
// NIC takes host memory only, the one without decides nothing, and a LOOM_NET_GDR_LEVEL that is not a
// level fails setup on both, naming the variable. The ranks are threads of this process with host
// hashes of their own, meeting through ThreadExchange.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <thread>
#include <vector>

#include "text_checks.h"
#include "thread_exchange.h"
#include "transport/transport_set.h"
#include "verbs_choice.h"

namespace loom {
namespace {

using net::expectWords;

struct RankResult {
  Status status;
  std::unique_ptr<TransportSet> transports;
};

// Rank 0 has GPU 0 (its driver exporting dmabufs, so that only the NIC stands in the way); rank 1 is
// a host rank. Both over the socket provider on loopback.
TransportOptions optionsFor(int rank) {
  TransportOptions options;
  options.netProvider = "socket";
  options.netDevice = "lo";
  options.timeoutMs = 10000;
  options.cudaDevice = rank == 0 ? 0 : -1;
  options.cudaDmabuf = rank == 0;
  return options;
}

// The two ranks, each on a host of its own.
std::vector<RankResult> setUpGpuAndHostRanks() {
  const std::vector<ProcessIdentity> peers = {{0x1111, getpid(), 1, "gpu-host"}, {0x2222, getpid(), 2, "cpu-host"}};
  ThreadExchange::Shared shared(2);
  std::vector<RankResult> results(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank)
    threads.emplace_back([&, rank] {
      ThreadExchange exchange(&shared, rank);
      results[rank].status = TransportSet::create(exchange, peers, optionsFor(rank), &results[rank].transports);
    });
  for (std::thread& t : threads) t.join();
  return results;
}

TEST(TransportSetGdr, SocketNicStagesTheGpuRanksMemoryAndAHostRankDecidesNothing) {
  net::ScopedEnv level("LOOM_NET_GDR_LEVEL", std::nullopt);
  std::vector<RankResult> ranks = setUpGpuAndHostRanks();
  for (const RankResult& r : ranks) ASSERT_TRUE(r.status.ok()) << r.status.message();
  const TransportSet& gpuRank = *ranks[0].transports;
  ASSERT_TRUE(gpuRank.hasNetPeers());
  EXPECT_EQ(gpuRank.netProviderName(), "socket");
  EXPECT_EQ(gpuRank.gdrChoice().mode, net::GdrMode::Staged);
  expectWords(gpuRank.gdrChoice().why, {"lo", "takes host memory only", "no dmabuf registration", "no nvidia-peermem"});
  const TransportSet& hostRank = *ranks[1].transports;
  ASSERT_TRUE(hostRank.hasNetPeers());
  EXPECT_EQ(hostRank.gdrChoice().mode, net::GdrMode::Staged);
  EXPECT_EQ(hostRank.gdrChoice().why, "") << "a rank without a GPU makes no GPUDirect RDMA decision";
}

TEST(TransportSetGdr, ABadGdrLevelFailsSetupOnEveryRank) {
  net::ScopedEnv level("LOOM_NET_GDR_LEVEL", "NEAR");
  std::vector<RankResult> ranks = setUpGpuAndHostRanks();
  // The GPU rank reads the level; the host rank learns of the failure in the handle exchange.
  EXPECT_EQ(ranks[0].status.code(), loomInvalidArgument) << ranks[0].status.message();
  expectWords(ranks[0].status.message(), {"network setup", "LOOM_NET_GDR_LEVEL=NEAR is not a level", "PXB"});
  EXPECT_EQ(ranks[1].status.code(), loomRemoteError) << ranks[1].status.message();
  expectWords(ranks[1].status.message(), {"rank 0 could not set up its network", "LOOM_NET_GDR_LEVEL=NEAR"});
}

}  // namespace
}  // namespace loom
