// Connections are made on first use (transport/transport_set.h): a rank holds none after init. To a
// memory peer, one per peer, channel and direction its operations used, between rank threads and
// between rank processes; to a network peer, every channel both ways once an operation names the peer
// (net/net_pairing.h), and a receive from any rank answers a sender it has no connection with yet.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "fork_ranks.h"
#include "loom.h"

namespace {

// The connections of a kind ("memory_connections", "net_connections") `comm`'s rank made so far
// (loomCommDumpState).
int connections(loomComm_t comm, const char* kind) {
  std::vector<char> text(1 << 16);
  size_t bytes = text.size();
  if (loomCommDumpState(comm, text.data(), &bytes) != loomSuccess) return -1;
  const nlohmann::json state = nlohmann::json::parse(std::string(text.data(), bytes), nullptr, false);
  if (state.is_discarded() || !state.contains("connections")) return -2;
  return state["connections"].value(kind, -3);
}

int memoryConnections(loomComm_t comm) { return connections(comm, "memory_connections"); }

// Every rank runs `body(rank, comm)` on a thread of its own.
template <typename Body>
void onEveryRank(std::vector<loomComm_t>& comms, Body body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < static_cast<int>(comms.size()); ++r) threads.emplace_back([&, r] { body(r, comms[r]); });
  for (std::thread& t : threads) t.join();
}

TEST(LazyConnections, RankThreadsMakeOnlyWhatTheirOperationsUse) {
  constexpr int n = 8;
  std::vector<loomComm_t> comms(n);
  ASSERT_EQ(loomCommInitAll(comms.data(), n, nullptr), loomSuccess) << loomGetLastError(nullptr);
  for (int r = 0; r < n; ++r) EXPECT_EQ(memoryConnections(comms[r]), 0) << "rank " << r << " right after init";

  // A message from rank 2 to rank 5: rank 2 makes its send to 5, rank 5 its receive from 2; no one else.
  onEveryRank(comms, [](int rank, loomComm_t comm) {
    int value = 7;
    if (rank == 2) {
      EXPECT_EQ(loomSend(&value, 1, loomInt32, 5, comm, nullptr), loomSuccess);
    }
    if (rank == 5) {
      value = 0;
      EXPECT_EQ(loomRecv(&value, 1, loomInt32, 2, comm, nullptr), loomSuccess);
      EXPECT_EQ(value, 7);
    }
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(memoryConnections(comms[r]), r == 2 || r == 5 ? 1 : 0) << "rank " << r;

  // A collective's plan reaches some peers on its channels, far fewer than init used to make (a send
  // and a receive to every peer on every channel and the point-to-point one), and sums right.
  onEveryRank(comms, [](int rank, loomComm_t comm) {
    std::vector<float> data(100'003, static_cast<float>(rank + 1));
    EXPECT_EQ(loomAllReduce(data.data(), data.data(), data.size(), loomFloat32, loomSum, comm, nullptr), loomSuccess);
    for (size_t i = 0; i < data.size(); i += 997) ASSERT_EQ(data[i], n * (n + 1) / 2.0f) << "element " << i;
  });
  const int channels = 2;  // LOOM_NCHANNELS's default; the test sets no other
  for (int r = 0; r < n; ++r) {
    const int made = memoryConnections(comms[r]);
    EXPECT_GT(made, r == 2 || r == 5 ? 1 : 0) << "rank " << r;
    EXPECT_LT(made, 2 * (n - 1) * (channels + 1)) << "rank " << r;
  }
  for (loomComm_t c : comms) EXPECT_EQ(loomCommDestroy(c), loomSuccess);
}

// Rank threads that reach each other over the network (LOOM_TRANSPORT=net, the socket provider on
// this host): a pair connects when an operation names it, every channel both ways, and no other.
TEST(LazyConnections, NetworkPeersConnectWhenAnOperationNamesThem) {
  constexpr int n = 6;
  const int channels = 2;  // LOOM_NCHANNELS's default; the test sets no other
  const int pair = 2 * (channels + 1);  // a send and a receive per channel and the point-to-point one
  setenv("LOOM_TRANSPORT", "net", 1);
  setenv("LOOM_ALGO", "ring", 1);  // a plan that reaches two peers (the tuner picks direct here: all of them)
  std::vector<loomComm_t> comms(n);
  const loomResult_t made = loomCommInitAll(comms.data(), n, nullptr);
  unsetenv("LOOM_TRANSPORT");
  unsetenv("LOOM_ALGO");
  ASSERT_EQ(made, loomSuccess) << loomGetLastError(nullptr);
  for (int r = 0; r < n; ++r) EXPECT_EQ(connections(comms[r], "net_connections"), 0) << "rank " << r << " after init";

  // Rank 1 sends to 4: the two connect; no one else does.
  onEveryRank(comms, [](int rank, loomComm_t comm) {
    int value = 11;
    if (rank == 1) EXPECT_EQ(loomSend(&value, 1, loomInt32, 4, comm, nullptr), loomSuccess) << loomGetLastError(comm);
    if (rank == 4) {
      value = 0;
      EXPECT_EQ(loomRecv(&value, 1, loomInt32, 1, comm, nullptr), loomSuccess) << loomGetLastError(comm);
      EXPECT_EQ(value, 11);
    }
  });
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(connections(comms[r], "net_connections"), r == 1 || r == 4 ? pair : 0) << "rank " << r;

  // Rank 0 receives from any rank; rank 5, which it has no connection with, sends. Rank 0 answers it.
  onEveryRank(comms, [](int rank, loomComm_t comm) {
    int value = 55;
    if (rank == 5) EXPECT_EQ(loomSend(&value, 1, loomInt32, 0, comm, nullptr), loomSuccess) << loomGetLastError(comm);
    if (rank == 0) {
      int source = -1;
      value = 0;
      EXPECT_EQ(loomRecvAny(&value, 1, loomInt32, &source, comm, nullptr), loomSuccess) << loomGetLastError(comm);
      EXPECT_EQ(source, 5);
      EXPECT_EQ(value, 55);
    }
  });
  EXPECT_EQ(connections(comms[0], "net_connections"), pair);
  EXPECT_EQ(connections(comms[5], "net_connections"), pair);

  // A ring connects each rank to its two neighbours (besides the pairs above), and sums right.
  onEveryRank(comms, [](int rank, loomComm_t comm) {
    std::vector<float> data(100'003, static_cast<float>(rank + 1));
    EXPECT_EQ(loomAllReduce(data.data(), data.data(), data.size(), loomFloat32, loomSum, comm, nullptr), loomSuccess)
        << loomGetLastError(comm);
    for (size_t i = 0; i < data.size(); i += 997) ASSERT_EQ(data[i], n * (n + 1) / 2.0f) << "element " << i;
  });
  for (int r = 0; r < n; ++r) {
    const int open = connections(comms[r], "net_connections");
    EXPECT_GE(open, 2 * pair) << "rank " << r;
    EXPECT_LE(open, 3 * pair) << "rank " << r << " (all " << n - 1 << " peers: " << pair * (n - 1) << ")";
    EXPECT_EQ(open % pair, 0) << "rank " << r << ": every pair's channels both ways";
  }
  for (loomComm_t c : comms) EXPECT_EQ(loomCommDestroy(c), loomSuccess);
}

// Between processes the FIFOs live in the receiver's shared segment: a connection made late must find
// the same FIFO its peer's made (send on one side, receive on the other), whichever side came first.
TEST(LazyConnections, RankProcessesFindEachOthersFifos) {
  constexpr int n = 3;
  const std::vector<pid_t> pids = forkRanks(n, nullptr, [](int rank, loomComm_t comm) {
    if (memoryConnections(comm) != 0) _exit(30);
    // Rank 1 sends to 2 first and then to 0; 0 sends to 2; each receive names its sender.
    int value = 100 + rank;
    if (rank == 1) {
      if (loomSend(&value, 1, loomInt32, 2, comm, nullptr) != loomSuccess) _exit(31);
      if (loomSend(&value, 1, loomInt32, 0, comm, nullptr) != loomSuccess) _exit(31);
    }
    if (rank == 0) {
      if (loomSend(&value, 1, loomInt32, 2, comm, nullptr) != loomSuccess) _exit(31);
      int got = 0;
      if (loomRecv(&got, 1, loomInt32, 1, comm, nullptr) != loomSuccess || got != 101) _exit(32);
    }
    if (rank == 2) {
      int got = 0;
      if (loomRecv(&got, 1, loomInt32, 0, comm, nullptr) != loomSuccess || got != 100) _exit(33);
      if (loomRecv(&got, 1, loomInt32, 1, comm, nullptr) != loomSuccess || got != 101) _exit(34);
    }
    const int expected[n] = {2, 2, 2};  // 0: send to 2, receive from 1; 1: sends to 2 and 0; 2: two receives
    if (memoryConnections(comm) != expected[rank]) _exit(35);
    std::vector<double> data(12'345, rank + 1.0);
    if (loomAllReduce(data.data(), data.data(), data.size(), loomFloat64, loomSum, comm, nullptr) != loomSuccess) _exit(36);
    for (double v : data)
      if (v != 6.0) _exit(37);
    _exit(loomCommDestroy(comm) == loomSuccess ? 0 : 38);
  });
  ASSERT_EQ(pids.size(), static_cast<size_t>(n));
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rank process " << pid << " status " << status;
  }
}

}  // namespace
