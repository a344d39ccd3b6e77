// TransportSet's GPUDirect RDMA decision as setup wires it (the decision itself: gdr_choice_test.cc).
// Two ranks on different hosts over the socket provider: the one with a GPU (TransportOptions::
// cudaDevice 0, as the communicator fills it; no GPU is touched here) is decided staged because the
// NIC takes host memory only, the one without decides nothing, and a LOOM_NET_GDR_LEVEL that is not a
// level fails setup on both, naming the variable. The ranks are threads of this process with host
// hashes of their own, meeting through ThreadExchange.
#include <gtest/gtest.h>

#include <unistd.h>

#include <barrier>
#include <cstring>
#include <thread>
#include <vector>

#include "transport/transport_set.h"
#include "verbs_choice.h"

namespace loom {
namespace {

// A PeerExchange for ranks that are threads of one process: allGather and barrier over memory. The
// network setup asks for nothing else (data connections are the bootstrap's, unused here).
class ThreadExchange final : public PeerExchange {
 public:
  struct Shared {
    explicit Shared(int nranks) : sync(nranks), records(nranks) {}
    std::barrier<> sync;
    std::vector<std::vector<char>> records;  // per rank: what it gave the allGather in progress
  };
  ThreadExchange(Shared* shared, int rank) : shared_(shared), rank_(rank) {}
  int rank() const override { return rank_; }
  int nranks() const override { return static_cast<int>(shared_->records.size()); }
  Status allGather(const void* mine, void* all, size_t bytes) override {
    const char* in = static_cast<const char*>(mine);
    shared_->records[rank_].assign(in, in + bytes);
    shared_->sync.arrive_and_wait();
    for (int r = 0; r < nranks(); ++r)
      std::memcpy(static_cast<char*>(all) + r * bytes, shared_->records[r].data(), bytes);
    shared_->sync.arrive_and_wait();  // every rank read every record before the next call overwrites one
    return Status::Ok();
  }
  Status barrier() override {
    shared_->sync.arrive_and_wait();
    return Status::Ok();
  }
  Status connectData(int, int, Socket*) override { return internalError("ThreadExchange has no data connections"); }
  Status acceptData(Socket*, int*, int*) override { return internalError("ThreadExchange has no data connections"); }

 private:
  Shared* shared_;
  int rank_;
};

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
  const std::vector<PeerLocation> peers = {{0x1111, getpid(), "gpu-host", 1}, {0x2222, getpid(), "cpu-host", 2}};
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

void expectWords(const std::string& text, std::initializer_list<const char*> words) {
  for (const char* w : words) EXPECT_NE(text.find(w), std::string::npos) << w << " missing in: " << text;
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
