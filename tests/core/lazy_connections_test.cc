// Connections to memory peers are made on first use (transport/transport_set.h): a rank holds none
// after init, one per peer, channel and direction its operations used after them, and what it made
// works as the eager ones did, between rank threads and between rank processes.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "fork_ranks.h"
#include "loom.h"

namespace {

// The connections to memory peers `comm`'s rank made so far (loomCommDumpState).
int memoryConnections(loomComm_t comm) {
  std::vector<char> text(1 << 16);
  size_t bytes = text.size();
  if (loomCommDumpState(comm, text.data(), &bytes) != loomSuccess) return -1;
  const nlohmann::json state = nlohmann::json::parse(std::string(text.data(), bytes), nullptr, false);
  if (state.is_discarded() || !state.contains("connections")) return -2;
  return state["connections"].value("memory_connections", -3);
}

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
