// Nonblocking communicators: operations queue to the progress thread and complete out of the
// caller's way; a send never waits for a later receive.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "loom.h"
#include "thread_ranks.h"

namespace {

// Runs body(rank, comm) on n threads, each with a nonblocking communicator.
void runNonblocking(int n, const std::function<void(int, loomComm_t)>& body) {
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = "async-test";
  runThreadRanks(n, config, body);
}

TEST(Async, SendsDoNotWaitForLaterReceives) {
  const size_t count = 8u << 20;  // far beyond what the FIFOs hold
  runNonblocking(2, [&](int rank, loomComm_t comm) {
    int peer = 1 - rank;
    std::vector<int32_t> out(count), in(count, -1);
    for (size_t i = 0; i < count; ++i) out[i] = static_cast<int32_t>(i * 3 + rank);
    ASSERT_EQ(loomSend(out.data(), count, loomInt32, peer, comm, nullptr), loomSuccess);
    uint64_t sendId = 0;
    ASSERT_EQ(loomCommLastOpId(comm, &sendId), loomSuccess);
    ASSERT_EQ(loomRecv(in.data(), count, loomInt32, peer, comm, nullptr), loomSuccess);
    uint64_t recvId = 0;
    ASSERT_EQ(loomCommLastOpId(comm, &recvId), loomSuccess);
    EXPECT_EQ(recvId, sendId + 1);
    ASSERT_EQ(loomCommWaitOp(comm, recvId, -1), loomSuccess) << loomGetLastError(comm);
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(in[i], static_cast<int32_t>(i * 3 + peer)) << i;
  });
}

TEST(Async, CollectivesRunInOrderAndWaitReportsProgress) {
  runNonblocking(3, [&](int rank, loomComm_t comm) {
    const size_t count = 1 << 20;
    std::vector<float> a(count, 1.0f + rank), b(count, 0.0f);
    ASSERT_EQ(loomAllReduce(a.data(), a.data(), count, loomFloat32, loomSum, comm, nullptr), loomSuccess);
    ASSERT_EQ(loomAllReduce(a.data(), b.data(), count, loomFloat32, loomMax, comm, nullptr), loomSuccess);
    uint64_t last = 0;
    ASSERT_EQ(loomCommLastOpId(comm, &last), loomSuccess);
    loomResult_t state = loomCommWaitOp(comm, last, 0);
    EXPECT_TRUE(state == loomSuccess || state == loomInProgress);
    ASSERT_EQ(loomCommWaitOp(comm, last, -1), loomSuccess) << loomGetLastError(comm);
    for (size_t i = 0; i < count; i += 4099) {
      ASSERT_EQ(a[i], 6.0f);
      ASSERT_EQ(b[i], 6.0f);
    }
    EXPECT_EQ(loomCommWaitOp(comm, last + 1, 0), loomInvalidArgument);
  });
}

TEST(Async, GroupedExchangeAndFinalizeFlushes) {
  runNonblocking(4, [&](int rank, loomComm_t comm) {
    const int n = 4;
    std::vector<std::vector<int64_t>> out(n), in(n);
    ASSERT_EQ(loomGroupStart(), loomSuccess);
    for (int p = 0; p < n; ++p) {
      size_t count = 1000 + 37 * static_cast<size_t>(rank + p);  // pair-specific size
      out[p].assign(count, rank * 100 + p);
      in[p].assign(count, -1);
      ASSERT_EQ(loomSend(out[p].data(), count, loomInt64, p, comm, nullptr), loomSuccess);
      ASSERT_EQ(loomRecv(in[p].data(), count, loomInt64, p, comm, nullptr), loomSuccess);
    }
    ASSERT_EQ(loomGroupEnd(), loomSuccess);
    ASSERT_EQ(loomCommFinalize(comm), loomSuccess) << loomGetLastError(comm);
    for (int p = 0; p < n; ++p)
      for (int64_t v : in[p]) ASSERT_EQ(v, p * 100 + rank);
  });
}

TEST(Async, StagedInputsAreReadWhenTheOperationRuns) {
  // PreMulSum scales a copy of its input; on a queue that copy must see what the earlier queued
  // allreduce wrote into the same buffer, not the buffer as it was at issue time.
  runNonblocking(2, [&](int, loomComm_t comm) {
    const size_t count = 4u << 20;
    std::vector<float> x(count, 1.0f);
    ASSERT_EQ(loomAllReduce(x.data(), x.data(), count, loomFloat32, loomSum, comm, nullptr), loomSuccess);
    float scalar = 2.0f;
    loomRedOp_t premul;
    ASSERT_EQ(loomRedOpCreatePreMulSum(&premul, &scalar, loomFloat32, loomScalarHostImmediate, comm), loomSuccess);
    ASSERT_EQ(loomAllReduce(x.data(), x.data(), count, loomFloat32, premul, comm, nullptr), loomSuccess);
    uint64_t last = 0;
    ASSERT_EQ(loomCommLastOpId(comm, &last), loomSuccess);
    ASSERT_EQ(loomCommWaitOp(comm, last, -1), loomSuccess) << loomGetLastError(comm);
    for (size_t i = 0; i < count; i += 997) ASSERT_EQ(x[i], 8.0f) << i;  // (1+1) -> 2*2 + 2*2
    EXPECT_EQ(loomRedOpDestroy(premul, comm), loomSuccess);
  });
}

// An operation nothing runs ahead of starts on its caller, which hands it to the progress thread when
// the peer is late (the caller's start is bounded). The handover happens right after the progress
// thread finished the previous operation, while it may still be reading its list of running ones:
// each round here makes rank 1 late, so that rank 0's caller hands its operation over just then.
// (TSan found the progress thread reading that list while a caller appended to it.)
TEST(Async, AnOperationStartedByItsCallerIsHandedToTheProgressThread) {
  runNonblocking(2, [&](int rank, loomComm_t comm) {
    std::vector<int32_t> x(16);
    for (int round = 0; round < 200; ++round) {
      for (size_t i = 0; i < x.size(); ++i) x[i] = round + rank + static_cast<int32_t>(i);
      if (rank == 1 && round % 2 == 1) std::this_thread::sleep_for(std::chrono::microseconds(150));
      ASSERT_EQ(loomAllReduce(x.data(), x.data(), x.size(), loomInt32, loomSum, comm, nullptr), loomSuccess);
      uint64_t last = 0;
      ASSERT_EQ(loomCommLastOpId(comm, &last), loomSuccess);
      ASSERT_EQ(loomCommWaitOp(comm, last, -1), loomSuccess) << loomGetLastError(comm);
      for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], 2 * (round + static_cast<int32_t>(i)) + 1) << round;
    }
  });
}

}  // namespace

// Destroy and abort with operations still queued: the communicator's explicit shutdown
// (loomComm::shutdown) stops its parts in order while the progress thread still has work, which ASan
// and TSan watch (scripts/sanitize.sh runs this suite under both).
TEST(Async, DestroyFinishesOperationsStillInFlight) {
  const size_t count = 64u << 10;
  const int calls = 16;
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.blocking = 0;
  runThreadRanks(3, config, [&](int rank, loomComm_t comm) {
    std::vector<std::vector<float>> bufs(calls, std::vector<float>(count, 1.0f + rank));
    for (auto& b : bufs)
      ASSERT_EQ(loomAllReduce(b.data(), b.data(), count, loomFloat32, loomSum, comm, nullptr), loomSuccess);
    std::vector<int32_t> out(count, rank), in(count, -1);
    const int next = (rank + 1) % 3, prev = (rank + 2) % 3;
    ASSERT_EQ(loomGroupStart(), loomSuccess);
    ASSERT_EQ(loomSend(out.data(), count, loomInt32, next, comm, nullptr), loomSuccess);
    ASSERT_EQ(loomRecv(in.data(), count, loomInt32, prev, comm, nullptr), loomSuccess);
    ASSERT_EQ(loomGroupEnd(), loomSuccess);
    ASSERT_EQ(loomCommDestroy(comm), loomSuccess) << "rank " << rank;  // nothing waited for
    for (const auto& b : bufs)
      for (size_t i = 0; i < count; i += 997) ASSERT_EQ(b[i], 6.0f) << i;
    for (size_t i = 0; i < count; i += 997) ASSERT_EQ(in[i], prev) << i;
  }, CommOwner::Body);
}

TEST(Async, AbortWithOperationsInFlightReleasesEveryRank) {
  const size_t count = 256u << 10;
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.timeoutMs = 20000;  // a bound on a bug, not what the test waits for
  runThreadRanks(3, config, [&](int rank, loomComm_t comm) {
    std::vector<std::vector<float>> bufs(8, std::vector<float>(count, 1.0f));
    for (auto& b : bufs) {
      // A survivor may already have seen the abort: then the call is refused, naming it.
      const loomResult_t queued = loomAllReduce(b.data(), b.data(), count, loomFloat32, loomSum, comm, nullptr);
      if (rank == 0) {
        ASSERT_EQ(queued, loomSuccess);
      }
      if (queued != loomSuccess) {
        const std::string why = loomGetLastError(comm);
        EXPECT_TRUE(why.find("abort") != std::string::npos || why.find("rank 0") != std::string::npos) << why;
        break;
      }
    }
    if (rank == 0) {
      EXPECT_EQ(loomCommAbort(comm), loomSuccess);  // its own operations still queued
      return;
    }
    // The survivors' queued operations end (done, or failed naming the aborted rank); destroy returns.
    uint64_t last = 0;
    ASSERT_EQ(loomCommLastOpId(comm, &last), loomSuccess);
    const loomResult_t waited = loomCommWaitOp(comm, last, -1);
    if (waited != loomSuccess) {
      EXPECT_NE(std::string(loomGetLastError(comm)), "") << "rank " << rank;
    }
    EXPECT_EQ(loomCommDestroy(comm), loomSuccess);
  }, CommOwner::Body);
}
